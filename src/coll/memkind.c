/* src/coll/memkind.c - the memory kind of a call (coll.h, "Device memory"):
 * host or device, from the caller's options or from the buffers themselves,
 * and the checks that go with it: no host and device buffers in one call,
 * device memory only where a device exists, the buffers on the device of an
 * NCCL communicator. DT_MEM_HOST costs nothing; DT_MEM_AUTO costs one load
 * when the process has no device (dt_dev_is_device), one
 * cudaPointerGetAttributes per buffer otherwise; DT_MEM_DEVICE over a device
 * transport asks only about buffers not already known as device memory of
 * its device (or managed memory), a lookup each (dt_dev_known). */
#include <stdio.h>
#include <stdlib.h>
#include "coll/coll_internal.h"
#include "core/device.h"
#include "core/error.h"

/* "sendbuf", "in[3]" */
static const char *arg_name(char *buf, size_t cap, const dt_region *r) {
    if (r->index >= 0) snprintf(buf, cap, "%s[%d]", r->name, r->index);
    else snprintf(buf, cap, "%s", r->name);
    return buf;
}

static const char *kind_name(char *buf, size_t cap, int is_dev, int dev) {
    if (is_dev && dev < 0) snprintf(buf, cap, "device memory (managed)");
    else if (is_dev) snprintf(buf, cap, "device memory (device %d)", dev);
    else snprintf(buf, cap, "host memory");
    return buf;
}

#define STACK_REGIONS 8

int dt_coll_classify(const char *fn, dt_coll_desc *d, const dt_coll_opts *opts) {
    dt_mem_kind want = opts ? opts->mem : DT_MEM_AUTO;
    d->stream = opts ? opts->stream : NULL;
    d->mem = DT_MEM_HOST;
    d->device = -1;
    d->event = NULL;
    if ((unsigned)want > DT_MEM_DEVICE)
        return dt_error(DT_ERR_INVALID, fn, "opts->mem is %d: not a memory kind (DT_MEM_AUTO 0, DT_MEM_HOST 1, "
                        "DT_MEM_DEVICE 2)", (int)want);
    if (want == DT_MEM_HOST) return DT_OK;
    if (want == DT_MEM_AUTO && dt_dev_count() == 0) return DT_OK; /* no device: host, no CUDA call */
    if (want == DT_MEM_DEVICE && dt_dev_count() == 0)
        return dt_error(DT_ERR_UNSUPPORTED, fn, "device memory (opts->mem DT_MEM_DEVICE) needs a CUDA device, and this "
                        "process has none: %s", dt_dev_absent_reason());

    dt_region stack[STACK_REGIONS], *r = stack;
    int devs_stack[STACK_REGIONS], *devs = devs_stack; /* each buffer's device, classified once */
    int n = dt_coll_regions(d, r, STACK_REGIONS);
    if (n > STACK_REGIONS) {
        r = malloc(sizeof *r * (size_t)n);
        devs = malloc(sizeof *devs * (size_t)n);
        if (!r || !devs) {
            free(r);
            free(devs);
            return dt_error(DT_ERR_NOMEM, fn, "out of memory for the %d buffers of a list", n);
        }
        dt_coll_regions(d, r, n);
    }
    /* said device memory over a device transport: buffers seen before on its
     * device are not asked about again (device.h, "Known device buffers") */
    dt_comm *c = d->comm;
    int known = want == DT_MEM_DEVICE && c->dev && dt_dev_known_on(), cdev = known ? c->dev->device(c) : -1;
    if (known) { /* every buffer known: the repeated call's whole answer */
        int all = 1;
        for (int i = 0; i < n && all; i++) {
            int dev;
            all = dt_dev_known(r[i].p, &dev) && (dev == cdev || dev == -1);
        }
        if (all) {
            if (r != stack) { free(r); free(devs); }
            d->mem = DT_MEM_DEVICE;
            d->device = cdev;
            return DT_OK;
        }
    }
    int rc = DT_OK, first_dev = -1, first_host = -1, dev0 = -1;
    for (int i = 0; i < n && rc == DT_OK; i++) {
        int dev, is;
        if (known && dt_dev_known(r[i].p, &dev) && (dev == cdev || dev == -1)) {
            is = 1;
        } else {
            is = dt_dev_is_device(r[i].p, &dev);
            if (is < 0) { rc = is; break; }
            if (known && is && (dev == cdev || dev == -1)) dt_dev_known_add(r[i].p, dev);
        }
        devs[i] = is ? dev : -1;
        if (is && first_dev < 0) { first_dev = i; dev0 = dev; }
        if (!is && first_host < 0) first_host = i;
        if (first_dev >= 0 && first_host >= 0) {
            char a[48], b[48], ka[64], kb[64];
            int hd = first_dev < first_host; /* name them in argument order */
            const dt_region *x = hd ? &r[first_dev] : &r[first_host], *y = hd ? &r[first_host] : &r[first_dev];
            rc = dt_error(DT_ERR_INVALID, fn, "host and device buffers in one call: %s is %s, %s is %s (all the "
                          "buffers of a call are host memory or all device memory)", arg_name(a, sizeof a, x),
                          kind_name(ka, sizeof ka, hd, dev0), arg_name(b, sizeof b, y), kind_name(kb, sizeof kb, !hd, dev0));
        }
    }
    if (rc == DT_OK && want == DT_MEM_DEVICE && first_host >= 0) {
        char a[48];
        rc = dt_error(DT_ERR_INVALID, fn, "opts->mem is DT_MEM_DEVICE but %s is host memory",
                      arg_name(a, sizeof a, &r[first_host]));
    }
    if (rc == DT_OK && (first_dev >= 0 || want == DT_MEM_DEVICE)) {
        d->mem = DT_MEM_DEVICE;
        d->device = dev0;
        if (c->dev) { /* over a device transport: every buffer on its device */
            if (!known) cdev = c->dev->device(c);
            for (int i = 0; i < n && rc == DT_OK; i++)
                if (devs[i] >= 0 && devs[i] != cdev) {
                    char a[48];
                    rc = dt_error(DT_ERR_INVALID, fn, "%s is on device %d, but the communicator's %s communicator is on "
                                  "device %d (the current device at dt_init)", arg_name(a, sizeof a, &r[i]), devs[i],
                                  c->dev->name, cdev);
                }
            d->device = cdev;
        } else if (d->device < 0) {
            rc = dt_dev()->get_device(&d->device);
        }
    }
    if (r != stack) free(r);
    if (devs != devs_stack) free(devs);
    return rc;
}
