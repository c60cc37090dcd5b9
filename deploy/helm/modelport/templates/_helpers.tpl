{{- define "modelport.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "modelport.labels" -}}
app.kubernetes.io/name: modelport
app.kubernetes.io/part-of: modelport
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The selector of one role's pods: (list $ "gateway") */}}
{{- define "modelport.selector" -}}
app.kubernetes.io/name: modelport
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{- define "modelport.envSecret" -}}
{{ .Values.secrets.existingSecret | default (printf "%s-env" .Release.Name) }}
{{- end }}

{{- define "modelport.signingSecret" -}}
{{ .Values.secrets.signingKeySecret | default (printf "%s-signing-key" .Release.Name) }}
{{- end }}

{{/* The pool's TLS Secret of one role: (list $ "gateway") */}}
{{- define "modelport.poolTlsSecret" -}}
{{- $ := index . 0 }}{{ $role := index . 1 }}
{{- index $.Values.poolTls (printf "%sSecret" $role) | default (printf "%s-pool-tls-%s" $.Release.Name $role) }}
{{- end }}

{{/* The pool's TLS variables of one role (docs/workers.md): (list $ "gateway") */}}
{{- define "modelport.poolTlsEnv" -}}
{{- $ := index . 0 }}{{ $role := index . 1 }}{{ $t := $.Values.poolTls }}
{{- if or (eq $role "worker") $t.mutual }}
- {name: MODELPORT_WORKER_TLS_CERT, value: /etc/modelport/pool-tls/tls.crt}
- {name: MODELPORT_WORKER_TLS_KEY, value: /etc/modelport/pool-tls/tls.key}
{{- end }}
{{- if or (eq $role "gateway") $t.mutual }}
- {name: MODELPORT_WORKER_TLS_CA, value: /etc/modelport/pool-tls/ca.crt}
{{- end }}
{{- if eq $role "gateway" }}
- {name: MODELPORT_WORKER_TLS_SERVER_NAME, value: {{ $t.serverName | quote }}}
{{- end }}
{{- end }}

{{- define "modelport.podSecurity" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  {{- toYaml .Values.seccompProfile | nindent 2 }}
{{- end }}

{{- define "modelport.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end }}

{{- define "modelport.envFrom" -}}
- configMapRef:
    name: {{ .Release.Name }}-config
- secretRef:
    name: {{ include "modelport.envSecret" . }}
{{- end }}
