/* src/bootstrap/launch_env.c - what the launcher of this process says, from
 * the environment: which launcher it was, and for torchrun and srun the rank,
 * the world size, the local rank and where rank 0 listens.
 *
 *   torchrun   RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
 *   srun       SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID in a job step
 *              (SLURM_STEP_ID set: a batch script itself is not a step), and
 *              an address: srun gives none, so MASTER_ADDR / MASTER_PORT
 *              (or DTRAIN_BOOTSTRAP_ADDR) must be exported, e.g.
 *              MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
 *   either     DTRAIN_BOOTSTRAP_ADDR=host:port ([v6addr]:port) overrides
 *              MASTER_ADDR / MASTER_PORT.
 * torchrun's static rendezvous (--node-rank, --master-addr/--master-port)
 * keeps its agent's store listening on MASTER_PORT for the whole job and
 * says so with TORCHELASTIC_USE_AGENT_STORE=True: rank 0 then listens on
 * MASTER_PORT + 1. (Its c10d rendezvous hands the workers a free port.)
 * torchrun's variables win over Slurm's (torchrun started by srun sets its
 * own for its workers). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bootstrap/bootstrap.h"
#include "core/error.h"

/* The variables Open MPI, MPICH/Hydra, MVAPICH, PMIx and Slurm's PMI set in
 * every process they start. */
static const char *const mpi_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK",
                                       "MPI_LOCALNRANKS", "MV2_COMM_WORLD_SIZE", "HYDI_CONTROL_FD"};

static const char *set(const char *var) {
    const char *v = getenv(var);
    return v && *v ? v : NULL;
}

dt_launcher dt_launch_detect(const char **var) {
    const char *dummy;
    if (!var) var = &dummy;
    for (size_t i = 0; i < sizeof mpi_vars / sizeof mpi_vars[0]; i++)
        if (getenv(mpi_vars[i])) { *var = mpi_vars[i]; return DT_LAUNCH_MPI; }
    if (set("RANK") || set("WORLD_SIZE")) { *var = set("RANK") ? "RANK" : "WORLD_SIZE"; return DT_LAUNCH_TORCHRUN; }
    if (set("SLURM_PROCID") && (set("SLURM_STEP_ID") || set("SLURM_STEPID"))) {
        *var = "SLURM_PROCID";
        return DT_LAUNCH_SLURM;
    }
    *var = NULL;
    return DT_LAUNCH_NONE;
}

/* Decimal integer in [lo, hi] from variable `var` (required: `req`). */
static int env_int(const char *var, int req, long lo, long hi, int *out, const char *which) {
    const char *v = set(var);
    if (!v) {
        if (!req) return DT_OK;
        return dt_error(DT_ERR_INVALID, "dt_init", "%s is not set (%s launch: set %s)", var, which, var);
    }
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi)
        return dt_error(DT_ERR_INVALID, "dt_init", "%s='%s' is not an integer in [%ld, %ld] (%s launch)", var, v, lo, hi, which);
    *out = (int)x;
    return DT_OK;
}

static int parse_port(const char *var, const char *v, int *port) {
    char *end;
    errno = 0;
    long p = strtol(v, &end, 10);
    if (end == v || *end || errno || p < 1 || p > 65535)
        return dt_error(DT_ERR_INVALID, "dt_init", "%s='%s' is not a TCP port (1..65535)", var, v);
    *port = (int)p;
    return DT_OK;
}

/* DTRAIN_BOOTSTRAP_ADDR=host:port or [v6]:port, else MASTER_ADDR + MASTER_PORT. */
static int read_addr(dt_launch_env *e, const char *which) {
    const char *a = set("DTRAIN_BOOTSTRAP_ADDR");
    if (a) {
        const char *colon = strrchr(a, ':'), *h = a;
        size_t hn;
        if (a[0] == '[') {
            const char *rb = strchr(a, ']');
            colon = rb && rb[1] == ':' ? rb + 1 : NULL; /* the port is all that follows "]:" */
            h = a + 1;
            hn = rb ? (size_t)(rb - h) : 0;
        } else {
            hn = colon ? (size_t)(colon - a) : 0;
        }
        if (!colon || hn == 0 || hn >= sizeof e->addr)
            return dt_error(DT_ERR_INVALID, "dt_init", "DTRAIN_BOOTSTRAP_ADDR='%s' is not host:port (or [ipv6]:port)", a);
        if (a[0] != '[' && memchr(a, ':', hn))
            /* no host name has a ':' (only an IPv6 address, which goes in brackets): refused
             * now rather than unresolvable until the bootstrap timeout */
            return dt_error(DT_ERR_INVALID, "dt_init", "DTRAIN_BOOTSTRAP_ADDR='%s' is not host:port (or [ipv6]:port): "
                            "its host '%.*s' has a ':' (an IPv6 address goes in brackets: [addr]:port)", a, (int)hn, a);
        memcpy(e->addr, h, hn);
        e->addr[hn] = '\0';
        e->addr_var = e->port_var = "DTRAIN_BOOTSTRAP_ADDR";
        int rc = parse_port("DTRAIN_BOOTSTRAP_ADDR's port", colon + 1, &e->port);
        return rc;
    }
    const char *m = set("MASTER_ADDR"), *p = set("MASTER_PORT");
    if (!m || !p)
        return dt_error(DT_ERR_INVALID, "dt_init", "%s is not set: the %s launch needs rank 0's address (MASTER_ADDR and MASTER_PORT, "
                      "or DTRAIN_BOOTSTRAP_ADDR=host:port)", !m ? "MASTER_ADDR" : "MASTER_PORT", which);
    if (strlen(m) >= sizeof e->addr) return dt_error(DT_ERR_INVALID, "dt_init", "MASTER_ADDR is longer than %zu characters", sizeof e->addr - 1);
    snprintf(e->addr, sizeof e->addr, "%s", m);
    e->addr_var = "MASTER_ADDR";
    e->port_var = "MASTER_PORT";
    int rc = parse_port("MASTER_PORT", p, &e->port);
    const char *agent = getenv("TORCHELASTIC_USE_AGENT_STORE");
    if (!rc && e->kind == DT_LAUNCH_TORCHRUN && agent && strcmp(agent, "True") == 0) {
        if (e->port == 65535)
            return dt_error(DT_ERR_INVALID, "dt_init", "MASTER_PORT=65535 is torchrun's agent store, and the port after it (which "
                          "dtrain's rank 0 would use) does not exist: pick a lower port or set DTRAIN_BOOTSTRAP_ADDR");
        e->port++;
        e->port_var = "MASTER_PORT + 1, beside torchrun's agent store";
    }
    return rc;
}

int dt_launch_env_read(dt_launch_env *e) {
    memset(e, 0, sizeof *e);
    e->local_rank = -1;
    e->kind = dt_launch_detect(&e->var);
    const char *rank_var, *size_var, *local_var, *which;
    if (e->kind == DT_LAUNCH_TORCHRUN) {
        rank_var = "RANK", size_var = "WORLD_SIZE", local_var = "LOCAL_RANK", which = "torchrun";
    } else if (e->kind == DT_LAUNCH_SLURM) {
        rank_var = "SLURM_PROCID", size_var = "SLURM_NTASKS", local_var = "SLURM_LOCALID", which = "srun";
    } else {
        return dt_error(DT_ERR_INVALID, "dt_init", "no torchrun (RANK, WORLD_SIZE) or srun (SLURM_PROCID, SLURM_NTASKS, "
                      "SLURM_STEP_ID) variables in the environment");
    }
    /* 1 << 24 ranks: far beyond any job, small enough for every size computation */
    int rc = env_int(size_var, 1, 1, 1L << 24, &e->size, which);
    if (!rc) rc = env_int(rank_var, 1, 0, (long)e->size - 1, &e->rank, which);
    if (!rc) rc = env_int(local_var, 0, 0, (long)e->size - 1, &e->local_rank, which);
    if (rc) return rc;
    if (e->size == 1 && !set("DTRAIN_BOOTSTRAP_ADDR") && !set("MASTER_ADDR") && !set("MASTER_PORT"))
        return DT_OK; /* a world of one needs no rendezvous */
    return read_addr(e, which);
}

static uint64_t fnv(uint64_t h, const char *s) {
    for (; *s; s++) { h ^= (unsigned char)*s; h *= 1099511628211ull; }
    return h;
}

uint64_t dt_launch_hostkey(void) {
    uint64_t h = 1469598103934665603ull;
    const char *id = set("DTRAIN_HOSTID");
    if (id) return fnv(fnv(h, "hostid:"), id);
    char name[256] = "", boot[64] = "";
    if (gethostname(name, sizeof name) != 0) name[0] = '\0';
    name[sizeof name - 1] = '\0';
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof boot, f)) boot[0] = '\0';
        fclose(f);
    }
    boot[strcspn(boot, "\n")] = '\0';
    return fnv(fnv(fnv(h, name), "/"), boot);
}
