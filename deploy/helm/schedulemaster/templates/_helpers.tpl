{{/* The release's full name, at most 63 characters. */}}
{{- define "sm.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "sm.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Selector labels of one component (pass a dict: ctx, component). */}}
{{- define "sm.selector" -}}
app.kubernetes.io/name: {{ .ctx.Chart.Name }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The Secret holding the cluster key, DSN and admin password. */}}
{{- define "sm.secretName" -}}
{{- if .Values.secrets.existingSecret -}}
{{- .Values.secrets.existingSecret -}}
{{- else -}}
{{- include "sm.fullname" . -}}
{{- end -}}
{{- end -}}

{{- define "sm.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "sm.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "sm.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "sm.shellImage" -}}
{{- printf "%s:%s" .Values.shellImage.repository (default (printf "%s-worker-shell" .Chart.AppVersion) .Values.shellImage.tag) -}}
{{- end -}}

{{/* The workers' grace period: given, or the drain timeout plus 30 s. */}}
{{- define "sm.workerGrace" -}}
{{- $drain := int .Values.workers.drainTimeoutSeconds -}}
{{- $grace := add $drain 30 -}}
{{- if .Values.workers.terminationGracePeriodSeconds -}}
{{- $grace = int .Values.workers.terminationGracePeriodSeconds -}}
{{- end -}}
{{- if le $grace (add $drain 25) -}}
{{- fail (printf "workers.terminationGracePeriodSeconds (%d) must exceed workers.drainTimeoutSeconds + 25 (%d): a worker's stop takes up to the drain timeout plus 25 s (its last reports and offline notice, then its API server)" $grace (add $drain 25)) -}}
{{- end -}}
{{- $grace -}}
{{- end -}}

{{/* The cluster key from the Secret, for masters and workers. */}}
{{- define "sm.clusterKeyEnv" -}}
- name: SM_CLUSTER_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "sm.secretName" . }}
      key: {{ .Values.secrets.keys.clusterKey }}
{{- end -}}

{{/* The node name from the pod's name and its address from the pod's IP (downward API). */}}
{{- define "sm.identityEnv" -}}
- name: SM_IDENTITY
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
{{- end -}}
