/* nbdrepl: concurrent writes of two primaries (allow-two-primaries).
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Pure rules, used by server/two-primaries.c and tested by
 * tests/test-conflict.c.  A node receives a write from the other
 * Primary (the "peer write") while one of its own writes to an
 * overlapping range is still in flight (the "local write": its range is
 * held in the node's interval lock).  Both nodes must end with the same
 * bytes, so each pair of overlapping writes must be applied in the same
 * order on both.  The facts at hand, on the receiving node, when the
 * peer write is taken from the connection:
 *
 *   acked   the peer's ACK of the local write came before the peer
 *           write on the connection: the peer applied ours first (it
 *           sends the ACK before it lets go of the range, and no write
 *           of its own to the range starts before that), so ours is the
 *           older one everywhere: the peer write is applied after it;
 *
 *   else    the two crossed on the wire: each node is in the same
 *           situation with the other's write, and both apply the rule
 *           of the node ids: the write of the node with the higher id is
 *           the newer one.  The higher-id node keeps its own bytes where
 *           the two overlap (it drops that part of the peer write, and
 *           acknowledges it all); the lower-id node applies the peer
 *           write over its own, once its own is on its disk.
 *
 * DRBD resolves the same race (drbd_receiver.c, handle_write_conflicts)
 * with the node that has the discard flag deciding alone and telling
 * the other (superseded / retry); here both decide the same way from
 * the same facts, and no message type is added.
 */
#ifndef NBDREPL_CONFLICT_H
#define NBDREPL_CONFLICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum conflict_action {
  CONFLICT_APPLY_AFTER,         /* wait until the local write is on our
                                   disk, then apply the peer write over
                                   it */
  CONFLICT_KEEP_LOCAL,          /* drop the part of the peer write that
                                   overlaps the local write */
};

/* What to do with a peer write that overlaps one of our local writes in
 * flight: acked as above; our_id and peer_id the two node ids (never
 * equal). */
extern enum conflict_action conflict_resolve (bool acked, uint32_t our_id,
                                              uint32_t peer_id);

/* A byte range [cr_start, cr_end). */
struct conflict_range {
  uint64_t cr_start, cr_end;
};

/* The parts of [start, end) that none of the n ranges in drop covers,
 * in ascending order, into out (room for max; n + 1 always suffices).
 * The drop ranges may overlap each other, lie partly outside, or come
 * in any order.  Returns the number of parts (0: nothing is left), or
 * -1 with errno = ERANGE if max is too small. */
extern ssize_t conflict_pieces (uint64_t start, uint64_t end,
                                const struct conflict_range *drop, size_t n,
                                struct conflict_range *out, size_t max);

#endif /* NBDREPL_CONFLICT_H */
