/* src/transport/transport.c - the tables of transports. DTRAIN_BACKEND names
 * one; auto takes the first whose probe accepts the job of the open
 * bootstrap. Device transports (nccl) have a table of their own. A new
 * transport = its folder + one entry here. Also what goes through a
 * communicator's transports whichever they are: the wire type's choice of op,
 * their names (dt_comm_backend, dt_comm_device_path), and its destruction. */
#include <stdio.h>
#include <string.h>
#include "core/device.h"
#include "transport/transport.h"

extern const dt_transport dt_transport_void;
#ifdef DTRAIN_HAVE_MPI
extern const dt_transport dt_transport_mpi;
#endif

const dt_transport *const dt_transports[] = {
#ifdef DTRAIN_HAVE_MPI
    &dt_transport_mpi,
#endif
    &dt_transport_void,
    NULL,
};

uint64_t dt_path_count[DT_PATH_N];

#ifdef DTRAIN_HAVE_CUDA
extern const dt_dev_transport dt_dev_transport_nccl;
#endif

const dt_dev_transport *const dt_dev_transports[] = {
#ifdef DTRAIN_HAVE_CUDA
    &dt_dev_transport_nccl,
#endif
    NULL,
};

static const dt_dev_transport *g_dev_test;

void dt_dev_transport_use_for_testing(const dt_dev_transport *t) { g_dev_test = t; }

const dt_dev_transport *dt_dev_transport_first(void) { return g_dev_test ? g_dev_test : dt_dev_transports[0]; }

const dt_transport *dt_transport_find(const char *name) {
    for (int i = 0; dt_transports[i]; i++)
        if (strcmp(dt_transports[i]->name, name) == 0) return dt_transports[i];
    return NULL;
}

const char *dt_transport_names(char *buf, size_t cap) {
    size_t n = 0;
    int k = 0;
    while (dt_transports[k]) k++;
    buf[0] = '\0';
    for (int i = 0; i < k && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", i == 0 ? "" : i == k - 1 ? " or " : ", ", dt_transports[i]->name);
    return buf;
}

int dt_transport_allreduce(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt, dt_op op, int wire) {
    if (wire != DT_WIRE_NATIVE && c->ops->allreduce_wire) return c->ops->allreduce_wire(c, s, r, n, dt, op, wire);
    return c->ops->allreduce(c, s, r, n, dt, op);
}

int dt_transport_reduce_scatter(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt, dt_op op, int wire) {
    if (wire != DT_WIRE_NATIVE && c->ops->reduce_scatter_wire)
        return c->ops->reduce_scatter_wire(c, s, r, n, dt, op, wire);
    return c->ops->reduce_scatter(c, s, r, n, dt, op);
}

int dt_transport_reduce(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt, dt_op op, int root, int wire) {
    if (wire != DT_WIRE_NATIVE && c->ops->reduce_wire) return c->ops->reduce_wire(c, s, r, n, dt, op, root, wire);
    return c->ops->reduce(c, s, r, n, dt, op, root);
}

const char *dt_comm_backend(const dt_comm *comm) {
    return (comm && comm->magic == DT_COMM_MAGIC && comm->ops) ? comm->ops->name : "?";
}

const char *dt_comm_device_path(const dt_comm *comm) {
    if (!comm || comm->magic != DT_COMM_MAGIC) return "?";
    if (comm->dev) return comm->dev->name;
    if (dt_dev_count() == 0) return "none";
    return comm->info.size == 1 ? "local" : "staged";
}

void dt_comm_destroy(dt_comm *c) {
    if (!c) return;
    if (c->dev && c->dev->destroy) c->dev->destroy(c);
    if (c->ops && c->ops->destroy) c->ops->destroy(c);
    dt_comm_free(c);
}
