/*
 * The end-to-end cases of test_exec_e2e.c, the hostile ones among them
 * (a busy loop past its timeout, an output flood, a memory bomb, a fork
 * bomb, a full /tmp, binary output, a result over etcd's budget), run in
 * warm sandboxes with the same assertions: see E2E_WARM there. The cases
 * that are about cold pods alone (CRI log rotation, a pod's runtime
 * class, the orphan sweep) are not built into this one.
 */
#pragma GCC diagnostic ignored "-Wunused-function"
#define E2E_WARM 1
#include "test_exec_e2e.c"
