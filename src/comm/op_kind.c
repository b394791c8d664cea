/* src/comm/op_kind.c - operation kinds: names and descriptions. */
#include <stdio.h>
#include "comm/op_kind.h"
#include "comm/registry.h"
#include "dtrain/dtype.h"

const char *dt_op_kind_name(int kind) {
    static const char *const names[] = {
        "allreduce", "allgather", "reduce_scatter", "reduce", "broadcast", "gather", "scatter",
        "all_to_all", "send", "recv", "barrier", "allreduce_list", "allgather_list",
        "reduce_scatter_fused", "reduce_scatter_per_rank"};
    if (kind == DT_OP_COMM_CREATE) return "sub-communicator creation";
    if (kind == DT_OP_FINALIZE) return "dt_finalize";
    if (kind == DT_OP_COMM_RELEASE) return "sub-communicator release";
    return (unsigned)kind < sizeof names / sizeof names[0] ? names[kind] : "?";
}

const char *dt_op_describe(char *buf, size_t cap, int kind, int dtype, uint64_t count, int op,
                           int root, uint64_t seq, uint32_t cid, uint32_t nlist, uint32_t layout) {
    return dt_op_describe_of(-1, buf, cap, kind, dtype, count, op, root, seq, cid, nlist, layout);
}

const char *dt_op_describe_of(int who, char *buf, size_t cap, int kind, int dtype, uint64_t count, int op,
                              int root, uint64_t seq, uint32_t cid, uint32_t nlist, uint32_t layout) {
    char cname[96], lay[32] = "";
    if (layout) snprintf(lay, sizeof lay, ", layout %08x", (unsigned)layout);
    if (who < 0) dt_reg_name(cid, cname, sizeof cname);
    else dt_reg_name_of(cid, who, cname, sizeof cname);
    const char *dn = dtype == (int)DT_FP_NONE ? "?" : dt_dtype_name((dt_dtype)dtype);
    const char *on = op == (int)DT_FP_NONE ? "?" : dt_op_name((dt_op)op);
    unsigned long long n = (unsigned long long)count, s = (unsigned long long)seq;
    switch (kind) {
    case DT_OP_COMM_CREATE: case DT_OP_COMM_RELEASE:
        snprintf(buf, cap, "%s #%llu on world", dt_op_kind_name(kind), s);
        return buf;
    case DT_OP_FINALIZE:
        snprintf(buf, cap, "dt_finalize");
        return buf;
    case DT_COLL_ALLREDUCE: case DT_COLL_REDUCE_SCATTER:
        snprintf(buf, cap, "%s(%s, count %llu, %s) #%llu on %s", dt_op_kind_name(kind), dn, n, on, s, cname);
        break;
    case DT_COLL_REDUCE:
        snprintf(buf, cap, "reduce(%s, count %llu, %s, root %d) #%llu on %s", dn, n, on, root, s, cname);
        break;
    case DT_COLL_BROADCAST: case DT_COLL_GATHER: case DT_COLL_SCATTER:
        snprintf(buf, cap, "%s(%s, count %llu, root %d) #%llu on %s", dt_op_kind_name(kind), dn, n, root, s, cname);
        break;
    case DT_COLL_ALLGATHER: case DT_COLL_ALL_TO_ALL:
        snprintf(buf, cap, "%s(%s, count %llu) #%llu on %s", dt_op_kind_name(kind), dn, n, s, cname);
        break;
    case DT_COLL_SEND:
        snprintf(buf, cap, "send(%s, count %llu, to rank %d) #%llu on %s", dn, n, root, s, cname);
        break;
    case DT_COLL_RECV:
        snprintf(buf, cap, "recv(%s, count %llu, from rank %d) #%llu on %s", dn, n, root, s, cname);
        break;
    case DT_COLL_BARRIER:
        snprintf(buf, cap, "barrier() #%llu on %s", s, cname);
        break;
    case DT_COLL_ALLREDUCE_LIST: case DT_COLL_REDUCE_SCATTER_LIST:
        snprintf(buf, cap, "%s(%u tensors, %llu elements%s, %s) #%llu on %s", dt_op_kind_name(kind),
                 (unsigned)nlist, n, lay, on, s, cname);
        break;
    case DT_COLL_ALLGATHER_LIST:
        snprintf(buf, cap, "allgather_list(%u tensors, %llu elements%s) #%llu on %s", (unsigned)nlist, n, lay, s, cname);
        break;
    default:
        snprintf(buf, cap, "operation %d #%llu on %s", kind, s, cname);
    }
    return buf;
}

