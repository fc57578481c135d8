/* route.c — addresses across nodes: ports, and au_send_to, which hands a message to a
 * local actor or to the data plane for another node.
 *
 * The invariant: a port is registered before any message for it can arrive: the I/O thread
 * looks ports up without a lock (rt_port_actor, an acquire load that pairs with the
 * registration's release), so the actor it finds is fully built.
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/data.h"
#include "runtime/rt.h"

int au_port_register(au_runtime_t *rt, au_port_t port, au_actor_t *a)
{
  if (!rt || !a || a->rt != rt || port == AU_NO_PORT) return AU_EINVAL;
  if (!rt->ports) {
    /* 65535 pointers, mapped lazily by calloc; registration happens before messages
     * for the port can arrive, on the thread that builds the node */
    rt->ports = calloc(AU_NO_PORT, sizeof(*rt->ports));
    if (!rt->ports) return AU_ENOMEM;
  }
  a->port = port;
  /* release: whoever looks the port up (the I/O thread) sees the whole actor */
  atomic_store_explicit(&rt->ports[port], a, memory_order_release);
  return 0;
}

void *au_send_to_start(au_runtime_t *rt, uint32_t node, au_port_t port, uint32_t type, size_t len,
                       au_outbuf_t *ob)
{
  if (!rt || !ob || node >= (uint32_t)rt->nodes) {
    if (ob) ob->rc = AU_EINVAL;
    return NULL;
  }
  ob->au__rt = rt;
  ob->au__node = node;
  ob->au__to = NULL;
  ob->rc = 0;
  if ((int)node != rt->rank) {
    rt_ctx_t *c = rt_ctx(rt);
    au_port_t from = c && c->current ? c->current->port : AU_NO_PORT;
    ob->au__msg = data_send_start(rt, node, port, type, from, len, &ob->rc);
    return ob->au__msg ? data_payload(ob->au__msg) : NULL;
  }
  if (!(ob->au__to = rt_port_actor(rt, port))) {
    ob->rc = AU_ENOENT;
    return NULL;
  }
  if (!(ob->au__msg = au_msg_alloc(rt, type, len))) {
    ob->rc = AU_ENOMEM;
    return NULL;
  }
  return ob->au__msg->data;
}

int au_send_to_finish(au_outbuf_t *ob)
{
  if (!ob->au__msg) return ob->rc ? ob->rc : AU_EINVAL;
  if (ob->au__to)
    au_msg_send(ob->au__to, ob->au__msg);
  else
    data_send_finish(ob->au__rt, ob->au__msg);
  ob->au__msg = NULL;
  return 0;
}

int au_send_to(au_runtime_t *rt, uint32_t node, au_port_t port, uint32_t type, const void *data,
               size_t len)
{
  if (len && !data) return AU_EINVAL;
  au_outbuf_t ob;
  void *p = au_send_to_start(rt, node, port, type, len, &ob);
  if (!p) return ob.rc;
  if (len) memcpy(p, data, len);
  return au_send_to_finish(&ob);
}
