{{/*
Names. Every object is karta-webhook (or karta-webhook-<what>): the server finds its webhook
configurations, Service and Lease by these names, so they do not follow the release name.
*/}}
{{- define "karta-webhook.name" -}}
karta-webhook
{{- end }}

{{- define "karta-webhook.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every object: the kustomize base's two, and Helm's.
*/}}
{{- define "karta-webhook.labels" -}}
app.kubernetes.io/name: {{ include "karta-webhook.name" . }}
app.kubernetes.io/part-of: {{ include "karta-webhook.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ include "karta-webhook.chart" . }}
{{- end }}

{{/*
The pods' selector: the name only, as in the kustomize base (a Deployment's selector cannot
change, so the two install paths can replace each other).
*/}}
{{- define "karta-webhook.selectorLabels" -}}
app.kubernetes.io/name: {{ include "karta-webhook.name" . }}
{{- end }}

{{- define "karta-webhook.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/*
The Secret with tls.crt, tls.key and ca.crt the pods mount.
*/}}
{{- define "karta-webhook.tlsSecret" -}}
{{- if eq .Values.certificates.mode "secret" -}}
{{- required "certificates.secretName is required with certificates.mode=secret" .Values.certificates.secretName }}
{{- else -}}
karta-webhook-tls
{{- end }}
{{- end }}

{{/*
The clientConfig of a webhook: the Service, and the caBundle when one is given (certManager
mode leaves it to cainjector).
*/}}
{{- define "karta-webhook.clientConfig" -}}
service:
  name: {{ include "karta-webhook.name" .root }}
  namespace: {{ .root.Release.Namespace }}
  path: {{ .path }}
  port: 443
{{- if and .root.Values.certificates.caBundle (ne .root.Values.certificates.mode "certManager") }}
caBundle: {{ .root.Values.certificates.caBundle | b64enc }}
{{- end }}
{{- end }}

{{/*
The catalog ConfigMap's file name for a `catalog` key: the key, ending in .yaml (the server
reads a folder's .yaml/.yml/.json files; the chart writes YAML).
*/}}
{{- define "karta-webhook.catalogFile" -}}
{{- if or (hasSuffix ".yaml" .) (hasSuffix ".yml" .) }}{{ . }}{{ else }}{{ . }}.yaml{{ end }}
{{- end }}
