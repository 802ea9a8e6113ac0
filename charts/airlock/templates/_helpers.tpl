{{/* The release's base name, at most 63 characters. */}}
{{- define "airlock.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "airlock.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component (controller, node-agent). */}}
{{- define "airlock.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "airlock.controllerName" -}}
{{- printf "%s-controller" (include "airlock.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "airlock.agentName" -}}
{{- printf "%s-node-agent" (include "airlock.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "airlock.image" -}}
{{- printf "%s:%s" .repository (.tag | default "latest") -}}
{{- end -}}

{{/* KUBERNETES_SERVICE_HOST/PORT when the values name the API server. */}}
{{- define "airlock.apiServerEnv" -}}
{{- if .Values.apiServer.host }}
- name: KUBERNETES_SERVICE_HOST
  value: {{ .Values.apiServer.host | quote }}
- name: KUBERNETES_SERVICE_PORT
  value: {{ .Values.apiServer.port | toString | quote }}
{{- end }}
{{- end -}}

{{/* The operator's config file, from .Values.config. */}}
{{- define "airlock.config" -}}
runtimeClassName: {{ .Values.runtimeClass.name }}
{{- if .Values.egress.enabled }}
networkRuntimeClassName: {{ .Values.egress.runtimeClass.name }}
{{- end }}
priorityClassName: {{ .Values.priorityClass.name }}
allowCustomImages: {{ .Values.config.allowCustomImages }}
runAsUser: {{ .Values.config.runAsUser }}
tmpSizeLimit: {{ .Values.config.tmpSizeLimit | quote }}
profiles:
{{- range $name, $p := .Values.config.profiles }}
  {{ $name }}:
    image: {{ $p.image | quote }}
    command: {{ toJson $p.command }}
    sourceFile: {{ $p.sourceFile | quote }}
    {{- with $p.policy }}
    policy: {{ toJson . }}
    {{- end }}
    {{- with $p.preload }}
    preload: {{ toJson . }}
    {{- end }}
    {{- if and $p.preload $p.warmup }}
    warmup: {{ toJson $p.warmup }}
    {{- end }}
    {{- with $p.network }}
    network: {{ toJson . }}
    {{- end }}
{{- end }}
defaults: {{ toJson .Values.config.defaults }}
caps: {{ toJson .Values.config.caps }}
quota: {{ toJson .Values.config.quota }}
artifacts: {{ toJson .Values.config.artifacts }}
{{- end -}}

{{/* Checks the schema cannot express. */}}
{{- define "airlock.validate" -}}
{{- if and .Values.apiServer.host (not .Values.apiServer.port) -}}
{{- fail "apiServer.port: required when apiServer.host is set" -}}
{{- end -}}
{{- if and .Values.apiServer.port (not .Values.apiServer.host) -}}
{{- fail "apiServer.host: required when apiServer.port is set" -}}
{{- end -}}
{{- if not (hasKey .Values.config.profiles .Values.test.runtime) -}}
{{- fail (printf "test.runtime: %q is not one of config.profiles (%s)" .Values.test.runtime (keys .Values.config.profiles | sortAlpha | join ", ")) -}}
{{- end -}}
{{- if not (has .Values.test.runtime (list "python" "node" "bash")) -}}
{{- fail (printf "test.runtime: %q: the test has programs for python, node and bash only" .Values.test.runtime) -}}
{{- end -}}
{{- range $name, $p := .Values.config.profiles -}}
{{- if $p.preload -}}
{{- if not (and (ge (len $p.command) 2) (eq (index $p.command 0) "/airlock/bin/run") (has (base (index $p.command 1)) (list "python3" "python"))) -}}
{{- fail (printf "config.profiles.%s.preload: needs the command [/airlock/bin/run, python3, ...] (a Python profile started by the runner)" $name) -}}
{{- end -}}
{{- else if and $p.warmup (not (hasKey $p "preload")) -}}
{{- /* preload: [] turns a default's off, its warm-up with it. */ -}}
{{- fail (printf "config.profiles.%s.warmup: needs a preload list" $name) -}}
{{- end -}}
{{- if and $p.network $p.network.egress (not $.Values.egress.enabled) -}}
{{- fail (printf "config.profiles.%s.network.egress: needs egress.enabled (the network RuntimeClass, the node agent's --network-runtime-class and the start gate)" $name) -}}
{{- end -}}
{{- end -}}
{{- $groups := dict -}}
{{- range $i, $g := .Values.nodeAgent.nodeGroups -}}
{{- if hasKey $groups $g.name -}}
{{- fail (printf "nodeAgent.nodeGroups[%d].name: %q is nodeAgent.nodeGroups[%d].name too: each group's DaemonSet is named by it" $i $g.name (index $groups $g.name)) -}}
{{- end -}}
{{- $_ := set $groups $g.name $i -}}
{{- $metrics := int ($g.metricsPort | default $.Values.nodeAgent.metricsPort) -}}
{{- $probes := int ($g.probePort | default $.Values.nodeAgent.probePort) -}}
{{- if eq $metrics $probes -}}
{{- fail (printf "nodeAgent.nodeGroups[%d]: its probePort and metricsPort (the group's, or nodeAgent's) are both %d: the probes need a port of their own" $i $probes) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.egress.enabled (eq .Values.egress.runtimeClass.name .Values.runtimeClass.name) -}}
{{- fail (printf "egress.runtimeClass.name: %q is runtimeClass.name too: executions without egress must not run under the class whose sandboxes may have a network stack" .Values.runtimeClass.name) -}}
{{- end -}}
{{- range $k := list "controller" "nodeAgent" -}}
{{- $d := index $.Values $k -}}
{{- if eq (int $d.probePort) (int $d.metricsPort) -}}
{{- fail (printf "%s.probePort: %d is %s.metricsPort too: the probes need a port of their own" $k (int $d.probePort) $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Set each key of the second dict of the list in the first (include for its effect). */}}
{{- define "airlock.setAll" -}}
{{- $dst := index . 0 -}}
{{- range $k, $v := index . 1 }}{{ $_ := set $dst $k $v }}{{ end -}}
{{- end -}}

{{/* A RuntimeClass's scheduling: the node agent's nodes. */}}
{{- define "airlock.runtimeClassScheduling" -}}
{{- with .Values.nodeAgent.nodeSelector }}
scheduling:
  nodeSelector: {{- toYaml . | nindent 4 }}
  {{- with $.Values.nodeAgent.tolerations }}
  tolerations: {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end -}}

{{- define "airlock.gateName" -}}
{{- printf "%s-egress-gate" (include "airlock.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The Secret holding the egress proxy's key (execution/egress_token.h). */}}
{{- define "airlock.egressKeyName" -}}
{{- printf "%s-egress-key" (include "airlock.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The TCP ports of every profile's host entries, space-separated and in
order: the proxy takes no other (its `ports` acl). "" when none.
*/}}
{{- define "airlock.egressPorts" -}}
{{- $ports := list -}}
{{- range $name, $p := .Values.config.profiles -}}
{{- range (dig "network" "egress" list $p) -}}
{{- if .host -}}
{{- range .ports -}}
{{- $ports = append $ports (int .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $ports | uniq | sortAlpha | join " " -}}
{{- end -}}
