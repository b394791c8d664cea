"""Every collective of dtrain.distributed.op, for every dtype and computation,
on the world and on sub-communicators, checked against values computed here
from all ranks' inputs. Run under mpiexec at any size (or standalone)."""
import numpy as np

import dtrain
from dtrain import distributed as dist

import harness as H
from harness import DTYPES, OPS, check, check_array, inp, reduce_ref, members

comm = dist.get_communicator()
R, S = comm.world_rank, comm.world_size
RLS = H.rank_lists(S)
salt_counter = [0]


def next_salt():
    salt_counter[0] += 1
    return salt_counter[0]


def dtypes_for(rl):
    """Every dtype on every rank_list (cheap: about 2 s at 4 ranks on 2 cores)."""
    return DTYPES


def tag(fn, dt, rl, *extra):
    return "%s %s rl=%s %s" % (fn, np.dtype(dt).name, rl, " ".join(map(str, extra)))


# ---- allreduce -------------------------------------------------------------
def t_allreduce():
    for rl in RLS:
        mem = members(R, rl, S)
        for dt in dtypes_for(rl):
            for op in OPS:
                salt = next_salt()
                shape = (3, 5)
                x = inp(R, dt, shape, salt, op)
                y = dtrain.allreduce(x, op, rank_list=rl)
                want = reduce_ref([inp(m, dt, shape, salt, op) for m in mem], op, dt)
                check_array(tag("allreduce", dt, rl, op), y, want)
                check("allreduce input untouched " + tag("", dt, rl, op),
                      np.array_equal(x, inp(R, dt, shape, salt, op)))


def t_allreduce_list():
    for rl in RLS[:3]:
        mem = members(R, rl, S)
        for op in OPS:
            salt = next_salt()
            specs = [(np.float32, (4,)), (np.int64, (2, 3)), (np.float16, (5,)),
                     (np.float32, (2, 2)), (np.uint8, (3,)), (np.float64, ()),
                     (np.int8, (0,)), (np.int32, (7,))]
            xs = [inp(R, dt, sh, salt + i, op) for i, (dt, sh) in enumerate(specs)]
            ys = dtrain.allreduce(xs, op, rank_list=rl)
            check("allreduce list returns list", isinstance(ys, list) and len(ys) == len(xs))
            for i, ((dt, sh), y) in enumerate(zip(specs, ys)):
                want = reduce_ref([inp(m, dt, sh, salt + i, op) for m in mem], op, dt)
                check_array(tag("allreduce_list[%d]" % i, dt, rl, op), y, want)
    # a list of one array gives the array (seed 003: allreduce([x]) is allreduce(x), as in
    # RAF); tuple input, empty list, out= list (one out non-contiguous)
    y1 = dtrain.allreduce([np.ones(3, np.float32)])
    check_array("allreduce list of one returns the array", y1, np.full(3, S, np.float32))
    y1 = dtrain.allreduce((np.ones(3, np.float32),))
    check_array("allreduce tuple of one", y1, np.full(3, S, np.float32))
    o1 = np.zeros(3, np.float32)
    check("allreduce list of one with out=[o] returns o",
          dtrain.allreduce([np.ones(3, np.float32)], out=[o1]) is o1 and (o1 == S).all())
    ys = dtrain.allreduce((np.ones(3, np.float32), np.ones(2, np.int8)))
    check("allreduce tuple of two returns a list", isinstance(ys, list) and len(ys) == 2)
    check_array("allreduce tuple", ys[0], np.full(3, S, np.float32))
    check("allreduce empty list", dtrain.allreduce([]) == [])
    a = np.arange(6, dtype=np.float64)
    big = np.zeros((4, 4), np.int32)
    outs = [a, big[:, 1]]
    res = dtrain.allreduce([a, np.full(4, R, np.int32)], "sum", out=outs)
    check("allreduce list out returns out", res[0] is a and res[1] is outs[1])
    check_array("allreduce list out in place", a, np.arange(6, dtype=np.float64) * S)
    check_array("allreduce list out noncontig", big[:, 1],
                np.full(4, sum(range(S)), np.int32))


def t_allreduce_misc():
    # in place, out=, non-contiguous input and out, 0-d, empty, numpy scalar, bf16 bits
    x = inp(R, np.float32, (4, 6), 1)
    want = reduce_ref([inp(m, np.float32, (4, 6), 1) for m in range(S)], "sum", np.float32)
    y = x.copy()
    r = dtrain.allreduce(y, out=y)
    check("allreduce out=x returns out", r is y)
    check_array("allreduce in place", y, want)
    nc = x.T                                   # F-ordered view
    check_array("allreduce noncontig input", dtrain.allreduce(nc), want.T)
    sl = inp(R, np.int32, (6, 8), 2)[::2, 1::3]
    check_array("allreduce strided input", dtrain.allreduce(sl, "max"),
                np.maximum.reduce([inp(m, np.int32, (6, 8), 2)[::2, 1::3] for m in range(S)]))
    o = np.zeros((6, 4), np.float32)
    r = dtrain.allreduce(x, out=o.T)
    check("allreduce noncontig out returns out", r.base is o)
    check_array("allreduce noncontig out", o.T.copy(), want)
    check_array("allreduce 0-d", dtrain.allreduce(np.array(2.5)), np.array(2.5 * S))
    check_array("allreduce numpy scalar", dtrain.allreduce(np.int64(3), "prod"),
                np.array(3 ** S, np.int64))
    check_array("allreduce empty", dtrain.allreduce(np.zeros((0, 3), np.float16)),
                np.zeros((0, 3), np.float16))
    be = inp(R, np.float32, (5,), 3).astype(">f4")
    check_array("allreduce big-endian input", dtrain.allreduce(be),
                reduce_ref([inp(m, np.float32, (5,), 3) for m in range(S)], "sum", np.float32))
    ro = inp(R, np.float64, (3,), 4)
    ro.setflags(write=False)
    check_array("allreduce read-only input", dtrain.allreduce(ro, "min"),
                reduce_ref([inp(m, np.float64, (3,), 4) for m in range(S)], "min", np.float64))
    # bfloat16 as raw bits
    for rl in RLS[:3]:
        mem = members(R, rl, S)
        for op in OPS:
            salt = next_salt()
            f = [inp(m, np.float32, (6,), salt, op) for m in mem]
            bits = H.f32_to_bf16_bits(inp(R, np.float32, (6,), salt, op))
            y = dtrain.allreduce(bits, op, rank_list=rl, dtype="bf16")
            check_array(tag("allreduce bf16", np.uint16, rl, op), y,
                        H.f32_to_bf16_bits(reduce_ref(f, op, np.float32)))


# ---- reduce_scatter ------------------------------------------------------------
def t_reduce_scatter():
    for rl in RLS:
        mem = members(R, rl, S)
        G, gr = len(mem), mem.index(R)
        for dt in dtypes_for(rl):
            for op in OPS:
                salt = next_salt()
                shape = (2 * G, 3)
                y = dtrain.reduce_scatter(inp(R, dt, shape, salt, op), op, rank_list=rl)
                full = reduce_ref([inp(m, dt, shape, salt, op) for m in mem], op, dt)
                check_array(tag("reduce_scatter", dt, rl, op), y, full[2 * gr:2 * gr + 2])
    # a list: one array per rank of the group (RAF's reduce_scatter(x_list), PyTorch's
    # reduce_scatter(output, input_list)): group rank g receives the reduction of
    # every member's x[g]
    for rl in RLS:
        mem = members(R, rl, S)
        G, gr = len(mem), mem.index(R)
        for dt in dtypes_for(rl):
            for op in OPS:
                salt = next_salt() * 64
                shape = (2, 3)
                xs = [inp(R, dt, shape, salt + k, op) for k in range(G)]
                y = dtrain.reduce_scatter(xs, op, rank_list=rl)
                want = reduce_ref([inp(m, dt, shape, salt + gr, op) for m in mem], op, dt)
                check_array(tag("reduce_scatter per-rank list", dt, rl, op), y, want)
                check("reduce_scatter per-rank list inputs untouched " + tag("", dt, rl, op),
                      all(np.array_equal(a, inp(R, dt, shape, salt + k, op))
                          for k, a in enumerate(xs)))
    for rl in RLS[:3]:
        mem = members(R, rl, S)
        G, gr = len(mem), mem.index(R)
        salt = next_salt() * 64
        want = reduce_ref([inp(m, np.float32, (4,), salt + gr) for m in mem], "sum", np.float32)
        # views of one array (the C library's no-copy path), a tuple, non-contiguous arrays
        big = np.concatenate([inp(R, np.float32, (4,), salt + k) for k in range(G)])
        check_array(tag("reduce_scatter per-rank views", np.float32, rl),
                    dtrain.reduce_scatter(np.split(big, G), rank_list=rl), want)
        check_array(tag("reduce_scatter per-rank tuple", np.float32, rl),
                    dtrain.reduce_scatter(tuple(np.split(big, G)), rank_list=rl), want)
        nc = [np.repeat(inp(R, np.float32, (4,), salt + k), 2)[::2] for k in range(G)]
        check_array(tag("reduce_scatter per-rank noncontig", np.float32, rl),
                    dtrain.reduce_scatter(nc, rank_list=rl), want)
        # out=, in place (out is this rank's own array), 0-d arrays, bf16 bits
        xs = [inp(R, np.float32, (4,), salt + k) for k in range(G)]
        o = np.zeros(4, np.float32)
        check("reduce_scatter per-rank out returns out",
              dtrain.reduce_scatter(xs, out=o, rank_list=rl) is o)
        check_array(tag("reduce_scatter per-rank out", np.float32, rl), o, want)
        r = dtrain.reduce_scatter(xs, out=xs[gr], rank_list=rl)
        check("reduce_scatter per-rank in place returns out", r is xs[gr])
        check_array(tag("reduce_scatter per-rank in place", np.float32, rl), xs[gr], want)
        check("reduce_scatter per-rank in place: other arrays untouched",
              all(np.array_equal(a, inp(R, np.float32, (4,), salt + k)) for k, a in enumerate(xs)
                  if k != gr))
        s0 = [np.array(k * 10 + R, np.int64) for k in range(G)]
        check_array(tag("reduce_scatter per-rank 0-d", np.int64, rl),
                    dtrain.reduce_scatter(s0, "max", rank_list=rl), np.array(gr * 10 + max(mem)))
        bits = [H.f32_to_bf16_bits(inp(R, np.float32, (3,), salt + k)) for k in range(G)]
        check_array(tag("reduce_scatter per-rank bf16", np.uint16, rl),
                    dtrain.reduce_scatter(bits, rank_list=rl, dtype="bf16"),
                    H.f32_to_bf16_bits(reduce_ref(
                        [inp(m, np.float32, (3,), salt + gr) for m in mem], "sum", np.float32)))
    x = inp(R, np.float64, (3, 2 * S), 5).T          # (2S, 3) non-contiguous
    full = reduce_ref([inp(m, np.float64, (3, 2 * S), 5).T for m in range(S)], "sum", np.float64)
    o = np.empty((2, 3), np.float64)
    r = dtrain.reduce_scatter(x, out=o)
    check("reduce_scatter out returns out", r is o)
    check_array("reduce_scatter noncontig", o, full[2 * R:2 * R + 2])


def t_group_reduce_scatter():
    """RAF's group_reduce_scatter: each array of the list reduce-scattered on its own
    (block k of array i along axis 0 to group rank k), one fused call."""
    for rl in RLS[:3]:
        mem = members(R, rl, S)
        G, gr = len(mem), mem.index(R)
        for op in OPS:
            salt = next_salt() * 8
            specs = [(np.float32, (G, 2)), (np.int32, (3 * G,)), (np.float16, (G, 1, 2)),
                     (np.float64, (0, 2))]
            xs = [inp(R, dt, sh, salt + i, op) for i, (dt, sh) in enumerate(specs)]
            ys = dtrain.group_reduce_scatter(xs, op, rank_list=rl)
            check("group_reduce_scatter returns a list",
                  isinstance(ys, list) and len(ys) == len(xs))
            for i, ((dt, sh), y) in enumerate(zip(specs, ys)):
                full = reduce_ref([inp(m, dt, sh, salt + i, op) for m in mem], op, dt)
                b = sh[0] // G
                check_array(tag("group_reduce_scatter[%d]" % i, dt, rl, op), y,
                            full[gr * b:(gr + 1) * b])
    xs = [np.full((S, 2), R + 1.0), np.arange(2 * S, dtype=np.int64)]
    outs = [np.zeros((1, 2)), np.zeros(4, np.int64)[::2]]
    r = dtrain.group_reduce_scatter(xs, out=outs)
    check("group_reduce_scatter out returns out", r[0] is outs[0] and r[1] is outs[1])
    check_array("group_reduce_scatter out[0]", outs[0], np.full((1, 2), S * (S + 1) / 2.0))
    check_array("group_reduce_scatter out[1] noncontig", outs[1].copy(),
                np.arange(2 * R, 2 * R + 2, dtype=np.int64) * S)


def t_group_allgather():
    """RAF's group_allgather(tensor_list, axis, out): each array gathered on its own."""
    for rl in RLS[:3]:
        mem = members(R, rl, S)
        salt = next_salt() * 8
        specs = [(np.float32, (2, 2)), (np.int8, (3,)), (np.float64, (1, 2))]
        xs = [inp(R, dt, sh, salt + i) for i, (dt, sh) in enumerate(specs)]
        wants = [np.concatenate([inp(m, dt, sh, salt + i) for m in mem], axis=0)
                 for i, (dt, sh) in enumerate(specs)]
        ys = dtrain.group_allgather(xs, 0, rank_list=rl)
        for i, (y, w) in enumerate(zip(ys, wants)):
            check_array(tag("group_allgather[%d]" % i, specs[i][0], rl), y, w)
        outs = [np.empty_like(w) for w in wants]
        r = dtrain.group_allgather(xs, 0, outs, rank_list=rl)
        check("group_allgather out returns out", all(a is b for a, b in zip(r, outs)))
        for i, (o, w) in enumerate(zip(outs, wants)):
            check_array(tag("group_allgather out[%d]" % i, specs[i][0], rl), o, w)
    x = inp(R, np.float32, (2, 3), 3)
    ys = dtrain.group_allgather([x], -1)
    check_array("group_allgather axis -1", ys[0],
                np.concatenate([inp(m, np.float32, (2, 3), 3) for m in range(S)], axis=-1))


# ---- allgather ------------------------------------------------------------------
def t_allgather():
    for rl in RLS:
        mem = members(R, rl, S)
        for dt in dtypes_for(rl):
            salt = next_salt()
            shape = (2, 3, 2)
            x = inp(R, dt, shape, salt)
            for axis in (0, 1, 2, -1):
                y = dtrain.allgather(x, axis=axis, rank_list=rl)
                want = np.concatenate([inp(m, dt, shape, salt) for m in mem], axis=axis)
                check_array(tag("allgather", dt, rl, "axis", axis), y, want)
    # 1-d, 0-d, noncontig, list (fused)
    check_array("allgather 0-d", dtrain.allgather(np.array(R, np.int64)),
                np.arange(S, dtype=np.int64))
    x = inp(R, np.float32, (4, 6), 6)[:, ::2]
    check_array("allgather noncontig axis1", dtrain.allgather(x, 1),
                np.concatenate([inp(m, np.float32, (4, 6), 6)[:, ::2] for m in range(S)], 1))
    for rl in RLS[:3]:
        mem = members(R, rl, S)
        salt = next_salt()
        specs = [(np.float32, (2, 2)), (np.int8, (3,)), (np.float64, (1, 2))]
        xs = [inp(R, dt, sh, salt + i) for i, (dt, sh) in enumerate(specs)]
        ys = dtrain.allgather(xs, axis=-1, rank_list=rl)
        for i, ((dt, sh), y) in enumerate(zip(specs, ys)):
            want = np.concatenate([inp(m, dt, sh, salt + i) for m in mem], axis=-1)
            check_array(tag("allgather_list[%d]" % i, dt, rl), y, want)


# ---- reduce / broadcast / gather / scatter (rooted) --------------------------------
def roots_of(mem, maxlen):
    """Root for round j: this group's member j (mod group size); every rank of
    a group computes the same root and all ranks make maxlen rounds."""
    return [mem[j % len(mem)] for j in range(maxlen)]


def maxlen(rl):
    return max(len(members(r, rl, S)) for r in range(S))


def t_reduce():
    # every dtype x op on the world, rotating roots
    for dt in DTYPES:
        for k, op in enumerate(OPS):
            salt = next_salt()
            root = (k + DTYPES.index(dt)) % S
            y = dtrain.reduce(inp(R, dt, (2, 3), salt, op), root, op)
            if R == root:
                want = reduce_ref([inp(m, dt, (2, 3), salt, op) for m in range(S)], op, dt)
                check_array(tag("reduce", dt, None, op, "root", root), y, want)
            else:
                check(tag("reduce non-root None", dt, None, op), y is None)
    for rl in RLS[1:]:
        mem = members(R, rl, S)
        for dt in dtypes_for(rl):
            for op in ("sum", "avg", "max"):
                for root in roots_of(mem, maxlen(rl)):
                    salt = next_salt()
                    y = dtrain.reduce(inp(R, dt, (4,), salt, op), root, op, rank_list=rl)
                    if R == root:
                        want = reduce_ref([inp(m, dt, (4,), salt, op) for m in mem], op, dt)
                        check_array(tag("reduce", dt, rl, op, "root", root), y, want)
                    else:
                        check(tag("reduce non-root None", dt, rl, op), y is None)
    # root=None: the group's first member
    rl = RLS[-1]
    mem = members(R, rl, S)
    y = dtrain.reduce(np.ones(2, np.float32), None, rank_list=rl)
    if R == mem[0]:
        check_array("reduce root=None", y, np.full(2, len(mem), np.float32))
    else:
        check("reduce root=None non-root", y is None)


def t_rooted_flat_rank_list():
    """RAF's reduce and broadcast take rank_list as ONE flat group ([0, 1]); a rank not
    in it runs standalone (its own root: it gets its own x back); the same for a rank
    in no group of a nested rank_list."""
    lists = [[0], list(range(S))] + ([[0, 1], [S - 1, 0]] if S >= 2 else [])
    for rl in lists:
        mem = sorted(rl) if R in rl else [R]
        root = rl[0]
        for dt in (np.float32, np.int32, np.float16):
            salt = next_salt()
            x = inp(R, dt, (3,), salt)
            y = dtrain.broadcast(x, root, rank_list=rl)
            want = inp(root if R in rl else R, dt, (3,), salt)
            check_array(tag("broadcast flat", dt, rl), y, want)
            y = dtrain.reduce(x, root, "sum", rank_list=rl)
            if R == root or R not in rl:
                check_array(tag("reduce flat", dt, rl), y,
                            reduce_ref([inp(m, dt, (3,), salt) for m in mem], "sum", dt))
            else:
                check(tag("reduce flat non-root None", dt, rl), y is None)
    if S >= 3:
        rl = [[S - 1, 1]]                       # ranks other than S-1 and 1: standalone
        x = np.array([R * 1.5])
        y = dtrain.broadcast(x, S - 1, rank_list=rl)
        check_array("broadcast nested, unlisted ranks alone", y,
                    np.array([(S - 1) * 1.5 if R in (1, S - 1) else R * 1.5]))
        y = dtrain.gather(x, S - 1, rank_list=rl)
        if R == S - 1:
            check_array("gather nested root", y, np.array([1.5, (S - 1) * 1.5]))
        elif R != 1:
            check_array("gather nested unlisted rank alone", y, x)


def t_broadcast():
    for rl in RLS:
        mem = members(R, rl, S)
        for dt in dtypes_for(rl):
            for root in roots_of(mem, maxlen(rl)):
                salt = next_salt()
                x = inp(R, dt, (3, 2), salt)
                y = dtrain.broadcast(x, root, rank_list=rl)
                check_array(tag("broadcast", dt, rl, "root", root), y, inp(root, dt, (3, 2), salt))
    x = inp(R, np.int64, (5,), 7)
    r = dtrain.broadcast(x, 0, out=x)
    check("broadcast out=x returns x", r is x)
    check_array("broadcast in place", x, inp(0, np.int64, (5,), 7))
    x = inp(R, np.float32, (4, 4), 8).T
    check_array("broadcast noncontig", dtrain.broadcast(x, S - 1), inp(S - 1, np.float32, (4, 4), 8).T)
    bits = H.f32_to_bf16_bits(np.full(3, R + 0.5, np.float32))
    check_array("broadcast bf16 bits", dtrain.broadcast(bits, 0, dtype="bf16"),
                H.f32_to_bf16_bits(np.full(3, 0.5, np.float32)))


def t_gather():
    for rl in RLS:
        mem = members(R, rl, S)
        for dt in dtypes_for(rl):
            for j, root in enumerate(roots_of(mem, maxlen(rl))):
                salt = next_salt()
                axis = j % 2
                y = dtrain.gather(inp(R, dt, (2, 3), salt), root, rank_list=rl, axis=axis)
                if R == root:
                    want = np.concatenate([inp(m, dt, (2, 3), salt) for m in mem], axis=axis)
                    check_array(tag("gather", dt, rl, "root", root, "axis", axis), y, want)
                else:
                    check(tag("gather non-root None", dt, rl), y is None)


def t_scatter():
    for rl in RLS:
        mem = members(R, rl, S)
        G, gr = len(mem), mem.index(R)
        for dt in dtypes_for(rl):
            for j, root in enumerate(roots_of(mem, maxlen(rl))):
                salt = next_salt()
                shape = (2 * G, 3)
                if R == root or j % 2 == 0:       # off the root: a same-shaped array...
                    y = dtrain.scatter(inp(R, dt, shape, salt), root, rank_list=rl)
                else:                             # ...or None + shape/dtype
                    y = dtrain.scatter(None, root, rank_list=rl, shape=shape, dtype=dt)
                want = inp(root, dt, shape, salt)[2 * gr:2 * gr + 2]
                check_array(tag("scatter", dt, rl, "root", root), y, want)
    # bf16 bits with x=None off the root
    full = H.f32_to_bf16_bits(np.arange(2 * S, dtype=np.float32))
    if R == 0:
        y = dtrain.scatter(full, 0, dtype="bf16")
    else:
        y = dtrain.scatter(None, 0, shape=(2 * S,), dtype="bf16")
    check_array("scatter bf16 bits", y, full[2 * R:2 * R + 2])


# ---- all_to_all -------------------------------------------------------------------
def t_all_to_all():
    for rl in RLS:
        mem = members(R, rl, S)
        G, gr = len(mem), mem.index(R)
        for dt in dtypes_for(rl):
            for sa, ca in ((0, 0), (1, 0), (0, 2), (2, 1), (-1, -2)):
                salt = next_salt()
                shape = [2, 3, 2]
                shape[sa] = G * 2
                shape = tuple(shape)
                y = dtrain.all_to_all(inp(R, dt, shape, salt), sa, ca, rank_list=rl)
                chunks = [np.split(inp(m, dt, shape, salt), G, axis=sa)[gr] for m in mem]
                want = np.concatenate(chunks, axis=ca)
                check_array(tag("all_to_all", dt, rl, "split", sa, "concat", ca), y, want)
    x = inp(R, np.int32, (3, 2 * S), 9).T            # noncontig (2S, 3)
    y = dtrain.all_to_all(x)
    want = np.concatenate([inp(m, np.int32, (3, 2 * S), 9).T[2 * R:2 * R + 2] for m in range(S)])
    check_array("all_to_all noncontig", y, want)


# ---- send / recv / barrier ---------------------------------------------------------
def t_p2p():
    if S == 1:
        return
    for dt in DTYPES:
        salt = next_salt()
        nxt, prv = (R + 1) % S, (R - 1) % S
        x = inp(R, dt, (2, 3), salt)
        if R % 2 == 0:
            t = dtrain.send(x, nxt)
            y = dtrain.recv(prv, (2, 3), dt, t)     # RAF's token (ordering is program order)
        else:
            y = dtrain.recv(prv, (2, 3), dt)
            dtrain.send(x, nxt, token=y)
        check_array(tag("send/recv ring", dt, None), y, inp(prv, dt, (2, 3), salt))
    # within groups of a rank_list, recv into out= (noncontig), bf16 bits
    rl = RLS[2]
    mem = members(R, rl, S)
    if len(mem) >= 2:
        gr = mem.index(R)
        if gr < 2:
            peer = mem[1 - gr]
            if gr == 0:
                dtrain.send(np.arange(4, dtype=np.float64) + R, peer, rank_list=rl)
                o = np.zeros((4, 2))
                r = dtrain.recv(peer, out=o[:, 0], rank_list=rl)
                check("recv out returns out", r.base is o)
                check_array("recv out noncontig", o[:, 0].copy(), np.arange(4.0) + peer)
            else:
                o = np.zeros((4, 2))
                dtrain.recv(peer, out=o[:, 0], rank_list=rl)
                dtrain.send(np.arange(4, dtype=np.float64) + R, peer, rank_list=rl)
                check_array("recv out noncontig", o[:, 0].copy(), np.arange(4.0) + peer)
    bits = H.f32_to_bf16_bits(np.full(2, R, np.float32))
    if R == 0:
        dtrain.send(bits, 1, dtype="bf16")
    elif R == 1:
        got = dtrain.recv(0, 2, "bf16")
        check_array("recv bf16 bits", got, H.f32_to_bf16_bits(np.zeros(2, np.float32)))
    dtrain.barrier()
    for rl in RLS:
        dtrain.barrier(rank_list=rl)
    comm.barrier()
    check("barriers", True)


def t_zero_size():
    z = np.zeros((0, 2), np.float32)
    check_array("allgather empty", dtrain.allgather(z), np.zeros((0, 2), np.float32))
    check_array("broadcast empty", dtrain.broadcast(z, 0), z)
    check_array("reduce_scatter empty", dtrain.reduce_scatter(z), z)
    check_array("all_to_all empty", dtrain.all_to_all(np.zeros((S, 0), np.int8)),
                np.zeros((S, 0), np.int8))


for name, fn in list(globals().items()):
    if name.startswith("t_") and callable(fn):
        H.guarded(name, fn)
if R == 0:
    print("world size %d, %s" % (S, H.env_info()))
H.finish()
