/* tests/bootstrap/tcp_launch.c - a small launcher in the manner of torchrun
 * and srun, for the tcp bootstrap's tests: starts N copies of a program on
 * this host with the variables those launchers set, and reports how they
 * ended.
 *
 *   tcp_launch [-n N] [-s] [-A] [-H K] [-t SECONDS] [-e RANK:VAR=VALUE]... -- PROG ARGS...
 *
 *   -n N      processes (default 2)
 *   -s        Slurm's variables (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
 *             SLURM_STEP_ID) instead of torchrun's (RANK, WORLD_SIZE,
 *             LOCAL_RANK, LOCAL_WORLD_SIZE); MASTER_ADDR/MASTER_PORT either way
 *   -A        as torchrun's static rendezvous does: the launcher itself listens
 *             on MASTER_PORT (its agent's store) for as long as the job runs,
 *             and sets TORCHELASTIC_USE_AGENT_STORE=True
 *   -H K      pretend the ranks run on hosts of K ranks each (DTRAIN_HOSTID
 *             h0, h1, ...; local ranks accordingly); also exported as
 *             DTRAIN_TEST_RANKS_PER_HOST for the program's own checks
 *   -t S      kill everything still running after S seconds (default 120)
 *   -e R:V=X  set V=X for rank R (R may be '*': every rank); applied last,
 *             so it can override the launcher's own variables
 * MASTER_PORT is a free port below the ephemeral range (pick_port). The
 * variables of MPI launchers are removed from the children's environment. Once a process
 * fails, the others get 15 s to end on their own, then SIGKILL (torchrun
 * also ends the others when one fails). Exit status: 0 when every process
 * exited 0; else the first failing process's status (128 + signal when
 * killed); 2 on a usage error. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXE 64

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* 1 when port can be bound now on every address (as the agent and rank 0 bind it) */
static int bindable(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons((uint16_t)port);
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* MASTER_PORT, and with the agent's store MASTER_PORT + 1 (where rank 0 then
 * listens) free too: both below the kernel's ephemeral range (32768 up by
 * default), so no outgoing connection of a test running beside this one can
 * take MASTER_PORT + 1 before rank 0 binds it; a port bound to 0 otherwise */
static int pick_port(int pair) {
    srand((unsigned)getpid() ^ (unsigned)time(NULL));
    for (int k = 0; k < 1000; k++) {
        int p = 20000 + rand() % 12000;
        if (bindable(p) && (!pair || bindable(p + 1))) return p;
    }
    return free_port();
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void setint(const char *var, int v) {
    char b[32];
    snprintf(b, sizeof b, "%d", v);
    setenv(var, b, 1);
}

static int usage(void) {
    fprintf(stderr, "usage: tcp_launch [-n N] [-s] [-A] [-H K] [-t SECONDS] [-e RANK:VAR=VALUE]... -- PROG ARGS...\n");
    return 2;
}

int main(int argc, char **argv) {
    int n = 2, slurm = 0, agent = 0, per_host = 0, ne = 0;
    double limit = 120;
    const char *ev[MAXE];
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-s")) slurm = 1;
        else if (!strcmp(argv[i], "-A")) agent = 1;
        else if (!strcmp(argv[i], "-H") && i + 1 < argc) per_host = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) limit = atof(argv[++i]);
        else if (!strcmp(argv[i], "-e") && i + 1 < argc && ne < MAXE) ev[ne++] = argv[++i];
        else return usage();
    }
    if (i + 1 >= argc || n < 1 || n > 256 || per_host < 0) return usage();
    char **prog = argv + i + 1;
    int port = pick_port(agent), store = -1;
    if (port < 0) { perror("tcp_launch: no free port"); return 1; }
    if (agent) { /* the agent's store holds MASTER_PORT */
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_ANY);
        a.sin_port = htons((uint16_t)port);
        int one = 1;
        store = socket(AF_INET, SOCK_STREAM, 0);
        if (store < 0 || setsockopt(store, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
            bind(store, (struct sockaddr *)&a, sizeof a) != 0 || listen(store, 8) != 0) {
            perror("tcp_launch: the agent store's port");
            return 1;
        }
    }
    static const char *const mpi_vars[] = {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_SIZE", "PMI_RANK",
                                           "PMIX_RANK", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_SIZE", "HYDI_CONTROL_FD"};
    pid_t *pid = calloc((size_t)n, sizeof *pid);
    int *status = calloc((size_t)n, sizeof *status), *done = calloc((size_t)n, sizeof *done);
    if (!pid || !status || !done) return 1;
    fflush(NULL);
    for (int r = 0; r < n; r++) {
        pid[r] = fork();
        if (pid[r] < 0) { perror("tcp_launch: fork"); return 1; }
        if (pid[r] > 0) continue;
        for (size_t k = 0; k < sizeof mpi_vars / sizeof mpi_vars[0]; k++) unsetenv(mpi_vars[k]);
        if (store >= 0) close(store);
        if (agent) setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
        int k = per_host ? per_host : n, local = r % k;
        setint(slurm ? "SLURM_PROCID" : "RANK", r);
        setint(slurm ? "SLURM_NTASKS" : "WORLD_SIZE", n);
        setint(slurm ? "SLURM_LOCALID" : "LOCAL_RANK", local);
        if (slurm) setenv("SLURM_STEP_ID", "0", 1);
        else setint("LOCAL_WORLD_SIZE", k);
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        setint("MASTER_PORT", port);
        if (per_host) {
            char h[32];
            snprintf(h, sizeof h, "h%d", r / per_host);
            setenv("DTRAIN_HOSTID", h, 1);
            setint("DTRAIN_TEST_RANKS_PER_HOST", per_host);
        }
        for (int e = 0; e < ne; e++) {
            char buf[512];
            snprintf(buf, sizeof buf, "%s", ev[e]);
            char *colon = strchr(buf, ':'), *eq = colon ? strchr(colon, '=') : NULL;
            if (!colon || !eq) { fprintf(stderr, "tcp_launch: bad -e '%s'\n", ev[e]); _exit(2); }
            *colon = *eq = '\0';
            if (strcmp(buf, "*") == 0 || atoi(buf) == r) setenv(colon + 1, eq + 1, 1);
        }
        execvp(prog[0], prog);
        fprintf(stderr, "tcp_launch: cannot run %s: %s\n", prog[0], strerror(errno));
        _exit(127);
    }
    double t0 = now(), failed_at = -1;
    int left = n, first_bad = -1;
    while (left > 0) {
        int st;
        pid_t w = waitpid(-1, &st, WNOHANG);
        if (w > 0) {
            for (int r = 0; r < n; r++)
                if (pid[r] == w) {
                    done[r] = 1;
                    status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                    if (status[r] && first_bad < 0) { first_bad = r; failed_at = now(); }
                }
            left--;
            continue;
        }
        double t = now();
        if (t - t0 > limit || (failed_at >= 0 && t - failed_at > 15)) {
            for (int r = 0; r < n; r++)
                if (!done[r]) {
                    fprintf(stderr, "tcp_launch: killing rank %d (pid %d): %s\n", r, (int)pid[r],
                            t - t0 > limit ? "time limit" : "another rank failed 15 s ago");
                    kill(pid[r], SIGKILL);
                }
            limit = 1e30;
            failed_at = -1;
        }
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    for (int r = 0; r < n; r++)
        if (status[r]) fprintf(stderr, "tcp_launch: rank %d exited with status %d\n", r, status[r]);
    if (store >= 0) close(store);
    int rc = first_bad >= 0 ? status[first_bad] : 0;
    free(pid);
    free(status);
    free(done);
    return rc;
}
