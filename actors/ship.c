/* ship.c — an actor's rows to another node's placer, in the shorter of the two forms
 * (psmsg.c has the layouts): what relocation.c and replication.c send. Its own file: the
 * placer calls into both of them, and psmsg.c is built alone into the fuzzers.
 */
#include "actors/placer.h"
#include "actors/remote.h"

int values_send(au_runtime_t *rt, obuf_t *wire, uint32_t to, uint32_t type, const au_table_t *t,
                uint64_t actor, uint16_t version, uint8_t hold_exp, const void *values, void *clear)
{
  const size_t dense = psm_values_len(t);
  /* a topic model's word rows at K = 1000 are mostly zero: counting the words that are not
   * before writing them read each actor twice (docs/cluster.md, "Relocation") */
  size_t sparse = 0;
  if (obuf_reserve(wire, dense + 8) == 0)
    sparse = psm_values_write_sparse(wire->p, t, actor, version, hold_exp, values);
  if (sparse) {
    const int rc = au_send_to(rt, to, PS_PLACER_PORT, type, wire->p, sparse);
    /* the words the pairs name, not the block's 128 KiB (actors moving in reuse it) */
    if (rc == 0 && clear) psm_values_zero_sparse(wire->p, clear);
    return rc;
  }
  au_outbuf_t ob;
  uint8_t *out = au_send_to_start(rt, to, PS_PLACER_PORT, type, dense, &ob);
  if (!out) return ob.rc;
  psm_values_write(out, t, actor, version, hold_exp, values);
  const int rc = au_send_to_finish(&ob);
  if (rc == 0 && clear) memset(clear, 0, table_actor_bytes(t));
  return rc;
}
