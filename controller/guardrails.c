/*
 * guardrails.c - what every namespace with executions gets before its
 * first pod (controller_priv.h): the ServiceAccount, the deny-all
 * NetworkPolicy and the ResourceQuotas that execution/podspec.c builds,
 * applied server-side and owned by the guard role when one is set.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "controller_priv.h"
#include "cx.h"
#include "log.h"
#include "podspec.h"
#include "xmalloc.h"

static const struct k8s_resource res_sa = { "", "v1", "serviceaccounts", 1 };
static const struct k8s_resource res_netpol = { "networking.k8s.io", "v1",
    "networkpolicies", 1 };
static const struct k8s_resource res_quota = { "", "v1", "resourcequotas", 1 };

const struct k8s_resource *const ctl_guard_res[3] = { &res_sa, &res_netpol,
    &res_quota };

/*
 * The ownerReference naming opts.guard_owner_role (a new reference), read
 * afresh once every resync_ms; NULL while the role cannot be read.
 */
static json_t *
guard_owner(struct controller *ctl)
{
	static const struct k8s_resource res = { "rbac.authorization.k8s.io",
	    "v1", "clusterroles", 0 };
	long long now = clock_mono_ms();
	struct k8s_error err;
	json_t *role = NULL, *ref = NULL;

	pthread_mutex_lock(&ctl->lock);
	if (ctl->guard_owner && now - ctl->guard_owner_at < ctl->opts.resync_ms)
		ref = json_incref(ctl->guard_owner);
	pthread_mutex_unlock(&ctl->lock);
	if (ref)
		return ref;
	if (k8s_get(ctl->client, &res, NULL, ctl->opts.guard_owner_role, &role,
	    &err) != 0) {
		log_warn("cannot read the guardrails' owner: no guardrails, no pods",
		    "clusterrole=%s error=\"%s\"", ctl->opts.guard_owner_role,
		    err.message);
		return NULL;
	}
	if (k8s_obj_uid(role))
		ref = json_pack("{s:s, s:s, s:s, s:s}", "apiVersion",
		    "rbac.authorization.k8s.io/v1", "kind", "ClusterRole", "name",
		    ctl->opts.guard_owner_role, "uid", k8s_obj_uid(role));
	json_decref(role);
	if (ref == NULL)
		return NULL;
	pthread_mutex_lock(&ctl->lock);
	if (ctl->guard_owner && !json_equal(ctl->guard_owner, ref))
		log_info("the guardrails' owner was made anew", "clusterrole=%s",
		    ctl->opts.guard_owner_role);
	json_decref(ctl->guard_owner);
	ctl->guard_owner = json_incref(ref);
	ctl->guard_owner_at = now;
	pthread_mutex_unlock(&ctl->lock);
	return ref;
}

/* Of a cache key "ns/name" in namespace ns, the name; else NULL. */
static const char *
key_in_ns(const char *key, const char *ns)
{
	size_t nl = strlen(ns);

	return key && strncmp(key, ns, nl) == 0 && key[nl] == '/' ? key + nl + 1 :
	    NULL;
}

/*
 * Until the cluster's quota controller has counted a new object-count
 * quota (it learns of a new CRD's resources by discovery, every 30 s), the
 * API server refuses every create it covers ("status unknown for quota").
 * So a quota with no status yet gets one: the limit, and the executions
 * this controller sees in the namespace; one counted under another limit
 * gets the new limit. Admission keeps the count from there, and the quota
 * controller corrects it at its next sync. Files out's objects (key
 * count/codeexecutionartifacts) are seeded with the same count, at most
 * one per execution: over, if anything, until that sync (their orphans
 * aside, which the sync counts). Pools with the pools this controller
 * caches in the namespace; sessions likewise.
 */
static void
seed_quota_status(struct controller *ctl, const char *ns, json_t *quota)
{
	static const char *const keys[] = { "count/codeexecutions.airlock.dev",
	    "count/codeexecutionartifacts.airlock.dev",
	    "count/codeexecutionpools.airlock.dev",
	    "count/codesessions.airlock.dev" };
	struct k8s_patch_opts po = { .type = K8S_PATCH_MERGE,
	    .subresource = "status" };
	json_t *st = json_object_get(quota, "status"), *all, *o, *p;
	json_t *hard_out = json_object(), *used_out = json_object();
	struct k8s_error err;
	size_t i, n = 0;
	int counted_n = 0;
	char used[32];

	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		const char *key = keys[k];
		const char *hard = json_string_value(json_object_get(json_object_get(
		    json_object_get(quota, "spec"), "hard"), key));
		const char *known = json_string_value(json_object_get(json_object_get(st,
		    "hard"), key));
		int counted = json_object_get(json_object_get(st, "used"), key) != NULL;

		/*
		 * Admission refuses while status.used lacks the resource,
		 * whatever status.hard says (the quota controller copies hard
		 * from the spec before it can count a resource it has not
		 * discovered).
		 */
		if (hard == NULL || (counted && known && strcmp(known, hard) == 0))
			continue;
		json_object_set_new(hard_out, key, json_string(hard));
		if (counted)
			continue;	/* counted, under an older limit: the limit only */
		if (k == 2) {
			/* The pools this controller sees in the namespace. */
			all = informer_by_index(ctl->pool_inf, ns);
			snprintf(used, sizeof(used), "%zu", json_array_size(all));
			json_decref(all);
			json_object_set_new(used_out, key, json_string(used));
			continue;
		}
		if (k == 3) {
			/* The sessions it sees there, by key: none unpacked. */
			size_t ns_n = 0;

			all = informer_keys(ctl->session_inf);
			json_array_foreach(all, i, o)
				ns_n += key_in_ns(json_string_value(o), ns) != NULL;
			json_decref(all);
			snprintf(used, sizeof(used), "%zu", ns_n);
			json_object_set_new(used_out, key, json_string(used));
			continue;
		}
		if (!counted_n) {
			/* By key ("ns/name"): no object unpacked. */
			all = informer_keys(ctl->cx_inf);
			json_array_foreach(all, i, o)
				n += key_in_ns(json_string_value(o), ns) != NULL;
			json_decref(all);
			counted_n = 1;
		}
		snprintf(used, sizeof(used), "%zu", n);
		json_object_set_new(used_out, key, json_string(used));
	}
	if (json_object_size(hard_out) == 0) {
		json_decref(hard_out);
		json_decref(used_out);
		return;
	}
	p = json_pack("{s:{s:s?}, s:{s:o, s:o}}", "metadata", "resourceVersion",
	    k8s_obj_rv(quota), "status", "hard", hard_out, "used", used_out);
	if (k8s_patch(ctl->client, ctl_guard_res[2], ns, k8s_obj_name(quota),
	    &po, p, NULL, &err) != 0 && err.http_status != 409)
		log_warn("cannot seed the quota's status", "namespace=%s "
		    "error=\"%s\"", ns, err.message);
	json_decref(p);
}

/*
 * The pods quota (airlock-executions) is not enforced at all until its
 * status.hard names a resource: admission restricts only what status.hard
 * lists, so every pod made in a new namespace before the quota controller's
 * first count of it got in uncounted (a pool of five in a namespace
 * allowed two ran three). So it is seeded here too, before any pod: the
 * limits, and nothing used, which is exact while this controller's cache
 * holds no pod in the namespace that is not over (its pods are the only
 * ones the quota's PriorityClass scope admits). Where one is, the count
 * is the quota controller's to make: CTL_EUNCOUNTED, and no pod meanwhile
 * (the execution waits as for a full quota, until its own timeout). 0 once
 * the quota is in force or seeded.
 */
static int
seed_pods_quota(struct controller *ctl, const char *ns, json_t *quota)
{
	struct k8s_patch_opts po = { .type = K8S_PATCH_MERGE,
	    .subresource = "status" };
	json_t *hard = json_object_get(json_object_get(quota, "spec"), "hard");
	json_t *st = json_object_get(quota, "status"), *used, *keys, *o, *pod, *p;
	struct k8s_error err;
	const char *key, *phase, *name;
	size_t i;
	int missing = 0, live = 0, rc;

	json_object_foreach(hard, key, o)
		if (json_object_get(json_object_get(st, "hard"), key) == NULL ||
		    json_object_get(json_object_get(st, "used"), key) == NULL)
			missing = 1;
	if (!missing)
		return 0;
	keys = informer_keys(ctl->pod_inf);
	json_array_foreach(keys, i, o) {
		if (live || (name = key_in_ns(json_string_value(o), ns)) == NULL)
			continue;
		pod = informer_get(ctl->pod_inf, ns, name);
		phase = json_string_value(json_object_get(json_object_get(pod,
		    "status"), "phase"));
		live = pod && (phase == NULL || (strcmp(phase, "Succeeded") != 0 &&
		    strcmp(phase, "Failed") != 0));
		json_decref(pod);
	}
	json_decref(keys);
	if (live) {
		log_debug("the pods quota is not counted yet: no pod until it is",
		    "namespace=%s", ns);
		return CTL_EUNCOUNTED;
	}
	used = json_object();
	json_object_foreach(hard, key, o)
		json_object_set_new(used, key, json_string("0"));
	p = json_pack("{s:{s:s?}, s:{s:O, s:o}}", "metadata", "resourceVersion",
	    k8s_obj_rv(quota), "status", "hard", hard, "used", used);
	rc = k8s_patch(ctl->client, ctl_guard_res[2], ns, k8s_obj_name(quota),
	    &po, p, NULL, &err);
	json_decref(p);
	if (rc != 0)
		log_debug("cannot seed the pods quota's status", "namespace=%s "
		    "error=\"%s\"", ns, err.message);
	/* A 409: counted meanwhile, or seeded by another worker; see again. */
	return rc;
}

/*
 * A forced apply takes back only the fields it names, and a tenant with
 * `edit` may add its own to the deny-all policy (an ingress or egress rule
 * that allows, a podSelector label that matches nothing), which the apply
 * would leave. So when the policy's spec is not exactly the one built, it
 * is replaced whole, at the version the apply returned.
 */
static int
netpol_exact(struct controller *ctl, const char *ns, json_t *want, json_t *got)
{
	struct k8s_error err;
	json_t *put;
	int rc;

	if (json_equal(json_object_get(got, "spec"), json_object_get(want, "spec")))
		return 0;
	put = json_deep_copy(got);
	json_object_set(put, "spec", json_object_get(want, "spec"));
	json_object_del(json_object_get(put, "metadata"), "managedFields");
	rc = k8s_update(ctl->client, ctl_guard_res[1], ns, k8s_obj_name(got),
	    NULL, put, NULL, &err);
	json_decref(put);
	if (rc != 0 && rc != K8S_ECONFLICT)
		log_warn("cannot restore the NetworkPolicy", "namespace=%s "
		    "error=\"%s\"", ns, err.message);
	else if (rc == 0)
		log_info("NetworkPolicy restored: its spec had been changed",
		    "namespace=%s", ns);
	return rc;
}

void
ctl_guard_changed(struct controller *ctl, const char *ns)
{
	pthread_mutex_lock(&ctl->lock);
	json_object_set_new(ctl->guarded, ns, json_integer(-++ctl->guard_seq));
	pthread_mutex_unlock(&ctl->lock);
}

int
ctl_ensure_guardrails(struct controller *ctl, const char *ns)
{
	struct k8s_patch_opts apply = { K8S_PATCH_APPLY, CTL_FIELD_MANAGER, 1, NULL };
	struct k8s_error err;
	json_t *nsobj = NULL, *objs[4], *owner = NULL;
	const struct k8s_resource *const res[4] = { ctl_guard_res[0],
	    ctl_guard_res[1], ctl_guard_res[2], ctl_guard_res[2] };
	char *warn = NULL;
	long long now = clock_mono_ms();
	json_int_t last;
	int rc = 0;

	pthread_mutex_lock(&ctl->lock);
	last = json_integer_value(json_object_get(ctl->guarded, ns));
	pthread_mutex_unlock(&ctl->lock);
	if (last > 0 && now - last < ctl->opts.resync_ms)
		return 0;

	metric_inc(ctl->m_guard_passes, NULL);
	/* Read for the admin's quota annotations; without it, the defaults. */
	if ((rc = k8s_get(ctl->client, &k8s_res_namespaces, NULL, ns, &nsobj,
	    &err)) != 0)
		nsobj = NULL;
	if (rc == K8S_ENOTFOUND) {
		/* Gone: nothing to guard, and no mark kept for it. */
		pthread_mutex_lock(&ctl->lock);
		json_object_del(ctl->guarded, ns);
		pthread_mutex_unlock(&ctl->lock);
		return K8S_ECANCELED;
	}
	rc = 0;
	if (json_is_string(json_object_get(json_object_get(nsobj, "status"),
	    "phase")) && strcmp(json_string_value(json_object_get(
	    json_object_get(nsobj, "status"), "phase")), "Terminating") == 0) {
		/*
		 * Nothing can be created there any more; nor need it be. Its
		 * guardrails' last events come now: no mark is kept for it.
		 */
		json_decref(nsobj);
		pthread_mutex_lock(&ctl->lock);
		json_object_del(ctl->guarded, ns);
		pthread_mutex_unlock(&ctl->lock);
		return K8S_ECANCELED;
	}
	objs[0] = podspec_service_account(ns);
	objs[1] = podspec_network_policy(ns);
	objs[2] = podspec_resource_quota(ctl->cfg, ns, nsobj, &warn);
	for (int i = 0; i < 2; i++) {
		if (warn) {
			log_warn("bad quota annotation", "namespace=%s "
			    "problem=\"%s\"", ns, warn);
			free(warn);
		}
		if (i == 0)
			objs[3] = podspec_object_quota(ctl->cfg, ns, nsobj, &warn);
	}
	if (ctl->opts.guard_owner_role && (owner = guard_owner(ctl)) == NULL) {
		for (int i = 0; i < 4; i++)
			json_decref(objs[i]);
		json_decref(nsobj);
		return K8S_ENOTFOUND;
	}
	for (int i = 0; i < 4; i++) {
		json_t *got = NULL;

		if (owner)
			json_object_set_new(json_object_get(objs[i], "metadata"),
			    "ownerReferences", json_pack("[O]", owner));
		if (rc == 0 && (rc = k8s_patch(ctl->client, res[i], ns,
		    k8s_obj_name(objs[i]), &apply, objs[i], &got, &err)) != 0)
			log_warn("cannot apply guardrail", "namespace=%s kind=%s "
			    "error=\"%s\"", ns, res[i]->plural, err.message);
		if (rc == 0 && i == 1)
			rc = netpol_exact(ctl, ns, objs[i], got);
		if (rc == 0 && i == 2)
			rc = seed_pods_quota(ctl, ns, got);
		if (rc == 0 && i == 3)
			seed_quota_status(ctl, ns, got);
		json_decref(got);
		json_decref(objs[i]);
	}
	json_decref(nsobj);
	json_decref(owner);
	/*
	 * Not if a guardrail changed meanwhile (its event's mark is there):
	 * this pass may have read it before the change, and the next pass,
	 * which the event queued, must not take it for done.
	 */
	if (rc == 0) {
		pthread_mutex_lock(&ctl->lock);
		if (json_integer_value(json_object_get(ctl->guarded, ns)) == last)
			json_object_set_new(ctl->guarded, ns, json_integer(now));
		pthread_mutex_unlock(&ctl->lock);
	}
	return rc;
}
