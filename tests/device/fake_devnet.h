/* tests/device/fake_devnet.h - a device transport for tests without a GPU
 * (transport.h's dt_dev_transport), over MPI on the fake runtime's memory
 * (fake_device.h): it runs the collective layer's primitives with MPI calls
 * and reduces exactly as the tests' references do, so the stream-ordered
 * device path (plans, checks over each channel, events, work handles) runs
 * end to end under mpirun. Install with fake_devnet_install() before
 * dt_init (after fake_dev_install). */
#ifndef DT_FAKE_DEVNET_H
#define DT_FAKE_DEVNET_H

#include "transport/transport.h"

extern const dt_dev_transport fake_devnet;
void fake_devnet_install(void);
/* Make async_error (and the watchdog's poll) report an error from now on. */
void fake_devnet_fail(const char *msg);
/* Prims run so far, and the kinds of the last call's. */
long fake_devnet_prims(void);
int fake_devnet_last(int *kinds, int cap);
/* abort_all calls so far. */
int fake_devnet_aborts(void);

#endif
