{{/* Names and labels shared by every object of the chart. */}}
{{- define "mcpgate.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mcpgate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "mcpgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcpgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "mcpgate.labels" -}}
{{ include "mcpgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* gateway.toml as mounted: the user's config, plus [cluster] when Redis is enabled and
metrics_public when a ServiceMonitor scrapes it. */}}
{{- define "mcpgate.config" -}}
{{- $cfg := .Values.config -}}
{{- if .Values.serviceMonitor.enabled -}}
{{- $cfg = regexReplaceAll "(?m)^\\[server\\]\\s*$" $cfg "[server]\nmetrics_public = true" -}}
{{- end -}}
{{ $cfg }}
{{- if .Values.redis.enabled }}

[cluster]
redis_env = "MCPGATE_REDIS_URL"
on_redis_error = {{ .Values.redis.onRedisError | quote }}
sessions_on_redis_error = {{ .Values.redis.sessionsOnRedisError | quote }}
{{- end }}
{{- end -}}

{{- define "mcpgate.secretName" -}}
{{- include "mcpgate.fullname" . }}-secrets
{{- end -}}

{{/* Whether the chart's own Secret has anything to hold. */}}
{{- define "mcpgate.ownSecret" -}}
{{- if or (and .Values.tokenKey.value (not .Values.tokenKey.existingSecret)) .Values.secretEnv (and .Values.redis.enabled .Values.redis.url (not .Values.redis.existingSecret)) -}}
true
{{- end -}}
{{- end -}}
