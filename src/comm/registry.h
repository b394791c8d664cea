/* src/comm/registry.h - internal: the communicators of this process by
 * creation index (cid): name and members (world ranks), for messages. Read
 * by the watchdog's thread too, so it keeps its own lock. */
#ifndef DT_COMM_REGISTRY_H
#define DT_COMM_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

void dt_reg_add(uint32_t cid, const char *name, const int *members, int n);
/* Name of communicator `cid` ("world", "[[0,1],[2,3]] group 0", "comm#7"). */
const char *dt_reg_name(uint32_t cid, char *buf, size_t cap);
/* Members of cid into out (at most cap); returns the count, 0 if unknown. */
int dt_reg_members(uint32_t cid, int *out, int cap);
void dt_reg_clear(void);

#endif
