/*
 * pause - the CRI sandbox ("pause") container of the test node.
 *
 * It holds the pod's namespaces open and does nothing else: sleep until a
 * signal, exit 0 on SIGTERM or SIGINT, and reap any child that ends up
 * reparented to it (it is PID 1 of a pod that shares its PID namespace).
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void quit(int sig) { (void)sig; _exit(0); }

static void reap(int sig)
{
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(void)
{
	struct sigaction sa = { 0 };

	sa.sa_handler = quit;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = reap;
	sa.sa_flags = SA_NOCLDSTOP;
	sigaction(SIGCHLD, &sa, NULL);
	for (;;)
		pause();
}
