/* ext.h — the runtime's extension interface: what the parameter server (actors/) uses
 * from the runtime beyond the public augur.h. actors/ includes this header and augur.h,
 * nothing else of runtime/, so the runtime's internal structs and modules can change
 * without touching it (docs/architecture.md, "Module boundaries").
 *
 * Names here are au__* (internal, but across the boundary), plus the runtime's small
 * standalone utilities that the parameter server uses as they are.
 */
#ifndef AUGUR_RUNTIME_EXT_H
#define AUGUR_RUNTIME_EXT_H

#include "augur.h"
#include "runtime/log.h" /* au__log: messages through au_log_set's function */

#endif
