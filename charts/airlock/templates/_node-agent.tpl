{{/*
The node agent's DaemonSet, for node-agent.yaml: root, the chart's
context; a, the nodeAgent values it runs with (a node group's over the
common ones); name, its name; group, its node group's name ("": none).
*/}}
{{- define "airlock.agentDaemonSet" -}}
{{- $r := .root -}}
{{- $a := .a -}}
{{- /* The egress byte cap's rules are the host's: its network namespace. */ -}}
{{- $hn := or $a.hostNetwork $r.Values.egress.enabled -}}
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {{ .name }}
  namespace: {{ $r.Release.Namespace }}
  labels:
    {{- include "airlock.labels" $r | nindent 4 }}
    app.kubernetes.io/component: node-agent
    {{- with .group }}
    airlock.dev/node-group: {{ . }}
    {{- end }}
spec:
  selector:
    matchLabels:
      {{- include "airlock.agentSelector" . | nindent 6 }}
  updateStrategy:
    type: RollingUpdate
    rollingUpdate: {maxUnavailable: 1}
  template:
    metadata:
      labels:
        {{- include "airlock.agentSelector" . | nindent 8 }}
    spec:
      serviceAccountName: {{ include "airlock.agentName" $r }}
      automountServiceAccountToken: true
      {{- with $r.Values.imagePullSecrets }}
      imagePullSecrets: {{- toYaml . | nindent 8 }}
      {{- end }}
      # The deadline's SIGKILL goes straight to gVisor's sandbox process
      # on the host (node-agent/docs/agent.md): the host's PID namespace.
      hostPID: true
      hostNetwork: {{ $hn }}
      {{- with $a.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      securityContext:
        seccompProfile: {type: RuntimeDefault}
      containers:
        - name: node-agent
          image: {{ include "airlock.image" $r.Values.image.nodeAgent }}
          imagePullPolicy: {{ $r.Values.image.nodeAgent.pullPolicy }}
          args:
            - --node-name=$(NODE_NAME)
            - --pod-logs-dir=/var/log/pods
            - --containerd-socket=/run/containerd/containerd.sock
            - --cgroup-mount=/host/sys/fs/cgroup
            - --cgroup-root={{ $a.cgroupRoot }}
            - --poll-ms={{ $a.pollMs }}
            - --hard-output-cap={{ $a.hardOutputCap | int64 }}
            - --sweep-ms={{ $a.sweepMs | int64 }}
            - --metrics-addr=:{{ $a.metricsPort }}
            - --probe-addr={{ if $hn }}127.0.0.1{{ end }}:{{ $a.probePort }}
            - --log-level={{ $a.logLevel }}
            # Its heartbeat, beside the controller's lease (controller/agents.c).
            - --lease-namespace=$(POD_NAMESPACE)
            {{- if not $a.removeStaleLogs }}
            - --keep-stale-logs
            {{- end }}
            - --exec-dir={{ $a.hostPaths.execDir }}
            {{- if $r.Values.egress.enabled }}
            # The one class whose sandboxes may have a network stack
            # (runsc's network=sandbox); without the flag, none may.
            - --network-runtime-class={{ $r.Values.egress.runtimeClass.name }}
            # The byte cap (docs/network.md): each such sandbox's traffic
            # counted in the node's netfilter, through this iptables.
            - --iptables={{ $r.Values.egress.meter.iptables }}
            {{- end }}
            {{- if $a.runsc.path }}
            - --runsc={{ $a.runsc.path }}
            - --runsc-root={{ $a.runsc.root }}
            {{- end }}
          env:
            - name: NODE_NAME
              valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
            - name: POD_NAMESPACE
              valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
            - name: POD_NAME
              valueFrom: {fieldRef: {fieldPath: metadata.name}}
            {{- include "airlock.apiServerEnv" $r | nindent 12 }}
          ports:
            - name: metrics
              containerPort: {{ $a.metricsPort }}
            - name: probes
              containerPort: {{ $a.probePort }}
          # As the controller's: a port of their own, loopback on the host.
          livenessProbe:
            httpGet:
              path: /healthz
              port: probes
              {{- if $hn }}
              host: 127.0.0.1
              {{- end }}
            periodSeconds: 10
          readinessProbe:
            httpGet:
              path: /readyz
              port: probes
              {{- if $hn }}
              host: 127.0.0.1
              {{- end }}
            periodSeconds: 5
          resources:
            {{- toYaml $a.resources | nindent 12 }}
          # Root for the containerd socket and the kubelet's root-owned log
          # files; no capability but KILL, for the sandbox processes, and
          # with egress NET_ADMIN, for the byte cap's rules in the host's
          # netfilter (on the host's network: hostNetwork above).
          securityContext:
            runAsUser: 0
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities: {drop: [ALL], add: [KILL{{ if $r.Values.egress.enabled }}, NET_ADMIN{{ end }}]}
          volumeMounts:
            - name: pod-logs
              mountPath: /var/log/pods
              readOnly: {{ not $a.removeStaleLogs }}
            - name: containerd
              mountPath: /run/containerd/containerd.sock
            - name: cgroup
              mountPath: /host/sys/fs/cgroup
              readOnly: true
            # Warm runs (node-agent/warm.c): FIFOs or the process file, at
            # the same path as on the host, where the shim or runsc opens
            # them; a run's directory is its mark against a second start.
            - name: exec
              mountPath: {{ $a.hostPaths.execDir }}
            {{- if $a.runsc.path }}
            - name: runsc
              mountPath: {{ $a.runsc.path }}
              readOnly: true
            - name: runsc-root
              mountPath: {{ $a.runsc.root }}
            {{- end }}
            {{- if $r.Values.egress.enabled }}
            # iptables' lock, the host's: shared with kube-proxy and the
            # NetworkPolicy engine (iptables -w waits on it).
            - name: xtables-lock
              mountPath: /run/xtables.lock
            {{- end }}
      volumes:
        - name: pod-logs
          hostPath: {path: {{ $a.hostPaths.podLogs | quote }}, type: Directory}
        - name: containerd
          hostPath: {path: {{ $a.hostPaths.containerdSocket | quote }}, type: Socket}
        - name: cgroup
          hostPath: {path: {{ $a.hostPaths.cgroup | quote }}, type: Directory}
        - name: exec
          hostPath: {path: {{ $a.hostPaths.execDir | quote }}, type: DirectoryOrCreate}
        {{- if $a.runsc.path }}
        - name: runsc
          hostPath: {path: {{ $a.runsc.path | quote }}, type: File}
        # Made if missing: containerd's runsc shim makes it at a node's
        # first gVisor pod, and the agent must start before that one.
        - name: runsc-root
          hostPath: {path: {{ $a.runsc.root | quote }}, type: DirectoryOrCreate}
        {{- end }}
        {{- if $r.Values.egress.enabled }}
        - name: xtables-lock
          hostPath: {path: /run/xtables.lock, type: FileOrCreate}
        {{- end }}
      {{- with $a.nodeSelector }}
      nodeSelector: {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $a.tolerations }}
      tolerations: {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end -}}

{{/*
The agent's pods' selector: the component's, and a node group's name so
that no group's DaemonSet takes another's pods. Whatever selects every
agent (the metrics Service, the NetworkPolicy) selects by the component.
*/}}
{{- define "airlock.agentSelector" -}}
{{- include "airlock.selector" (dict "root" .root "component" "node-agent") }}
{{- with .group }}
airlock.dev/node-group: {{ . }}
{{- end }}
{{- end -}}
