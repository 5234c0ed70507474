/* SPDX-License-Identifier: MIT */
/* list.h - intrusive doubly linked list (circular, with a head node) */
#ifndef RMSG_LIST_H
#define RMSG_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct rmsgi_list {
	struct rmsgi_list *next, *prev;
};

static inline void rmsgi_list_init(struct rmsgi_list *h)
{
	h->next = h;
	h->prev = h;
}

static inline bool rmsgi_list_empty(const struct rmsgi_list *h)
{
	return h->next == h;
}

static inline void rmsgi_list_add_tail(struct rmsgi_list *h,
				       struct rmsgi_list *n)
{
	n->prev = h->prev;
	n->next = h;
	h->prev->next = n;
	h->prev = n;
}

static inline void rmsgi_list_add_head(struct rmsgi_list *h,
				       struct rmsgi_list *n)
{
	n->next = h->next;
	n->prev = h;
	h->next->prev = n;
	h->next = n;
}

static inline void rmsgi_list_del(struct rmsgi_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n;
	n->prev = n;
}

static inline struct rmsgi_list *rmsgi_list_pop(struct rmsgi_list *h)
{
	struct rmsgi_list *n = h->next;

	if (n == h)
		return NULL;
	rmsgi_list_del(n);
	return n;
}

#define rmsgi_list_entry(p, type, member) \
	((type *)((char *)(p)-offsetof(type, member)))

#define rmsgi_list_for_each(pos, head) \
	for ((pos) = (head)->next; (pos) != (head); (pos) = (pos)->next)

#define rmsgi_list_for_each_safe(pos, tmp, head)                         \
	for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head); \
	     (pos) = (tmp), (tmp) = (pos)->next)

#endif /* RMSG_LIST_H */
