/* Event queue: total order by (tick, class, push sequence). */
#include <criterion/criterion.h>

#include "sim/queue.h"
#include "base/rng.h"

static lsim_qev ev(lsim_tick t, int cls, int64_t tag) {
  lsim_qev e = {t, cls, 0, 0, 0, tag, 0};
  return e;
}

Test(queue, orders_by_tick_then_class_then_push_order) {
  lsim_queue q = LSIM_QUEUE_INIT;
  /* pushed deliberately out of order; tags say where each must come out */
  lsim_qev in[] = {ev(5, 1, 5), ev(3, 2, 3), ev(3, 0, 1), ev(5, 0, 4),
                   ev(3, 0, 2), ev(9, 0, 7), ev(5, 1, 6), ev(0, 3, 0)};
  for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
    cr_assert_eq(lsim_queue_push(&q, &in[i]), 0);
  lsim_qev out;
  for (int64_t want = 0; want < 8; want++) {
    cr_assert_eq(lsim_queue_pop(&q, &out), 1);
    cr_assert_eq(out.a, want, "position %lld got tag %lld", (long long)want,
                 (long long)out.a);
  }
  cr_assert_eq(lsim_queue_pop(&q, &out), 0);
  lsim_queue_release(&q);
}

Test(queue, ties_leave_in_push_order_at_scale) {
  /* 50,000 events on 7 ticks x 3 classes: within each (tick, class) the
  ** pop order must equal the push order, whatever the heap does. */
  lsim_queue q = LSIM_QUEUE_INIT;
  lsim_rng r;
  lsim_rng_init(&r, 99, 1);
  const int n = 50000;
  for (int i = 0; i < n; i++) {
    lsim_qev e = ev((lsim_tick)lsim_rng_below(&r, 7),
                    (int)lsim_rng_below(&r, 3), i);
    cr_assert_eq(lsim_queue_push(&q, &e), 0);
  }
  cr_assert_eq(lsim_queue_len(&q), (size_t)n);
  lsim_qev prev, cur;
  cr_assert_eq(lsim_queue_pop(&q, &prev), 1);
  for (int i = 1; i < n; i++) {
    cr_assert_eq(lsim_queue_pop(&q, &cur), 1);
    int ordered = prev.tick < cur.tick ||
                  (prev.tick == cur.tick && prev.cls < cur.cls) ||
                  (prev.tick == cur.tick && prev.cls == cur.cls &&
                   prev.a < cur.a && prev.seq < cur.seq);
    cr_assert(ordered, "out of order at pop %d", i);
    prev = cur;
  }
  cr_assert_null(lsim_queue_peek(&q));
  lsim_queue_release(&q);
}

Test(queue, peek_matches_pop_and_interleaving_keeps_order) {
  lsim_queue q = LSIM_QUEUE_INIT;
  lsim_qev a = ev(10, 0, 1), b = ev(10, 0, 2), c = ev(4, 5, 3), out;
  lsim_queue_push(&q, &a);
  lsim_queue_push(&q, &c);
  cr_assert_eq(lsim_queue_peek(&q)->a, 3);
  lsim_queue_pop(&q, &out);
  cr_assert_eq(out.a, 3);
  lsim_queue_push(&q, &b); /* same key as a, pushed later: leaves later */
  lsim_queue_pop(&q, &out);
  cr_assert_eq(out.a, 1);
  lsim_queue_pop(&q, &out);
  cr_assert_eq(out.a, 2);
  lsim_queue_release(&q);
}

Test(queue, release_empties_and_the_queue_can_be_reused) {
  lsim_queue q = LSIM_QUEUE_INIT;
  lsim_qev a = ev(3, 1, 1), b = ev(3, 1, 2), out = ev(9, 9, 9);
  cr_assert_eq(lsim_queue_pop(&q, &out), 0);
  cr_assert_eq(out.a, 9); /* an empty pop leaves *out alone */
  cr_assert_eq(lsim_queue_push(&q, &a), 0);
  cr_assert_eq(a.seq, 0); /* the caller's event is not changed */
  lsim_queue_release(&q);
  cr_assert_eq(lsim_queue_len(&q), 0);
  cr_assert_null(lsim_queue_peek(&q));
  lsim_queue_release(&q); /* twice is safe */
  cr_assert_eq(lsim_queue_push(&q, &b), 0);
  cr_assert_eq(lsim_queue_push(&q, &a), 0);
  cr_assert_eq(lsim_queue_pop(&q, &out), 1);
  cr_assert_eq(out.a, 2); /* pushed first after the release */
  cr_assert_gt(out.seq, 0); /* seq kept counting */
  cr_assert_eq(lsim_queue_pop(&q, &out), 1);
  cr_assert_eq(out.a, 1);
  lsim_queue_release(&q);
}
