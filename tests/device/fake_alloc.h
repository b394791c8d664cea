/* tests/device/fake_alloc.h - the fake device's memory as a dev_alloc
 * (dev_common.h) for the device tests: device memory from the fake runtime
 * (device 0), copies both ways a plain memcpy (it is host memory underneath).
 * Included by one test program each. */
#ifndef DT_TEST_FAKE_ALLOC_H
#define DT_TEST_FAKE_ALLOC_H

#include <string.h>
#include "dev_common.h"
#include "fake_device.h"

static void *fake_alloc_dev(size_t n) { return fake_dev_malloc(n, 0); }
static void fake_alloc_copy(void *d, const void *s, size_t n) { memcpy(d, s, n); }
static const dev_alloc FAKE = {fake_alloc_dev, fake_dev_free, fake_alloc_copy, fake_alloc_copy};

#endif
