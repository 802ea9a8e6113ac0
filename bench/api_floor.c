/*
 * api_floor - the API server's floor for bench/controller.sh: what the
 * least any controller must ask of the API server costs, made by a client
 * that does nothing else. For each CodeExecution already in namespace NS
 * (listed once, as a controller starting up would):
 *
 *   WRITES 2: the Cold status write at the listed resourceVersion, the
 *             execution's pod (podspec_build, as the controller makes
 *             it), then the Pending status write (podName, codeSha256,
 *             its conditions): the controller's own three requests;
 *   WRITES 1: the pod, then one status write saying all of that;
 *   WRITES 0: the pod alone.
 *
 * THREADS threads share the executions and one client (its pooled
 * connections), as the controller's workers do. No watch, no cache, no
 * workqueue, no guardrails: whatever a controller adds to these requests
 * is above this floor. Prints one line, the list included in the time:
 *
 *   executions=<n> seconds=<s> rate=<executions/s> failed=<n>
 *
 * usage: api_floor KUBECONFIG CONTROLLER_CONFIG NS THREADS WRITES
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "client.h"
#include "clock.h"
#include "config.h"
#include "controller_priv.h"
#include "ctl_config.h"
#include "cx.h"
#include "podspec.h"

static struct k8s_client *client;
static struct ctl_config *cfg;
static const char *ns;
static json_t *items;
static int writes;
static atomic_size_t next;
static atomic_int failed;

/* Merge-patch status st into cx at its resourceVersion, which follows. */
static int
write_status(json_t *cx, json_t *st)
{
	struct k8s_patch_opts po = { .type = K8S_PATCH_MERGE,
	    .subresource = "status" };
	struct k8s_error err;
	json_t *patch, *out = NULL;
	int rc;

	patch = json_pack("{s:{s:s}, s:O}", "metadata", "resourceVersion",
	    k8s_obj_rv(cx), "status", st);
	rc = k8s_patch(client, &cx_resource, ns, k8s_obj_name(cx), &po, patch,
	    &out, &err);
	json_decref(patch);
	if (rc == 0)
		json_object_set(json_object_get(cx, "metadata"), "resourceVersion",
		    json_object_get(json_object_get(out, "metadata"),
		    "resourceVersion"));
	else
		fprintf(stderr, "api_floor: status of %s: %s\n",
		    k8s_obj_name(cx), err.message);
	json_decref(out);
	return rc;
}

static int
one(json_t *cx)
{
	struct podspec_result r;
	struct k8s_error err;
	json_t *st;
	int rc;

	if (writes == 2) {
		st = json_pack("{s:s}", "startMode", "Cold");
		rc = write_status(cx, st);
		json_decref(st);
		if (rc != 0)
			return rc;
	}
	if ((rc = podspec_build_sized(cfg, cx, 0, &r, &err)) != 0) {
		fprintf(stderr, "api_floor: pod of %s: %s\n", k8s_obj_name(cx),
		    err.message);
		return rc;
	}
	rc = k8s_create(client, &k8s_res_pods, ns, r.pod, NULL, &err);
	if (rc != 0)
		fprintf(stderr, "api_floor: create %s: %s\n", k8s_obj_name(r.pod),
		    err.message);
	if (rc == 0 && writes > 0) {
		/* What the controller's Pending write says (init_pending). */
		st = json_pack("{s:s, s:s, s:s, s:i}", "podName",
		    k8s_obj_name(r.pod), "codeSha256", r.code_sha256, "phase",
		    "Pending", "observedGeneration", 1);
		ctl_set_condition(st, "Scheduled", "False", "Pending",
		    "waiting for a node", 1);
		ctl_set_condition(st, "Started", "False", "Pending",
		    "not started", 1);
		ctl_set_condition(st, "Complete", "False", "Pending",
		    "not finished", 1);
		if (writes == 1)
			json_object_set_new(st, "startMode", json_string("Cold"));
		rc = write_status(cx, st);
		json_decref(st);
	}
	podspec_result_free(&r);
	return rc;
}

static void *
worker(void *arg)
{
	size_t i;

	(void)arg;
	while ((i = atomic_fetch_add(&next, 1)) < json_array_size(items))
		if (one(json_array_get(items, i)) != 0)
			atomic_fetch_add(&failed, 1);
	return NULL;
}

int
main(int argc, char **argv)
{
	struct k8s_config *kc;
	struct k8s_error err;
	pthread_t tid[64];
	int threads;
	long long t0;
	double secs;

	if (argc != 6 || (threads = atoi(argv[4])) < 1 || threads > 64 ||
	    (writes = atoi(argv[5])) < 0 || writes > 2) {
		fprintf(stderr, "usage: api_floor KUBECONFIG CONTROLLER_CONFIG "
		    "NS THREADS(1-64) WRITES(0-2)\n");
		return 2;
	}
	ns = argv[3];
	if (k8s_config_load_kubeconfig(argv[1], NULL, &kc, &err) != 0 ||
	    k8s_client_new(kc, NULL, &client, &err) != 0) {
		fprintf(stderr, "api_floor: %s\n", err.message);
		return 1;
	}
	if (ctl_config_load(argv[2], &cfg, &err) != 0) {
		fprintf(stderr, "api_floor: %s: %s\n", argv[2], err.message);
		return 1;
	}
	t0 = clock_mono_ms();
	if (k8s_list_all(client, &cx_resource, ns, NULL, &items, NULL,
	    &err) != 0) {
		fprintf(stderr, "api_floor: list: %s\n", err.message);
		return 1;
	}
	for (int i = 0; i < threads; i++)
		pthread_create(&tid[i], NULL, worker, NULL);
	for (int i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	secs = (double)(clock_mono_ms() - t0) / 1000.0;
	printf("executions=%zu seconds=%.2f rate=%.1f failed=%d\n",
	    json_array_size(items), secs, (double)json_array_size(items) / secs,
	    atomic_load(&failed));
	json_decref(items);
	ctl_config_free(cfg);
	k8s_client_free(client);
	k8s_config_free(kc);
	return atomic_load(&failed) ? 1 : 0;
}
