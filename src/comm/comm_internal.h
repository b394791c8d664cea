/* src/comm/comm_internal.h - internal: the communicator layer (transitional:
 * the transport interface moved to transport/transport.h). */
#ifndef DT_COMM_INTERNAL_H
#define DT_COMM_INTERNAL_H
#include "transport/transport.h"
#endif
