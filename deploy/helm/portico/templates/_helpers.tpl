{{/*
The labels Helm's conventions add to every object the chart renders, on top of the
labels of deploy/. Selectors and pod templates keep deploy/'s labels alone: a selector
cannot change once created, and a pod template label that carries the chart's version
would restart every pod on a chart upgrade that changes nothing else.
*/}}
{{- define "portico.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
An image reference: repository:tag, with @digest when one is given. The tag defaults to
the chart's appVersion (call with dict "image" .Values.image "appVersion" .Chart.AppVersion).
*/}}
{{- define "portico.image" -}}
{{- $tag := .image.tag | default .appVersion -}}
{{- if .image.digest -}}
{{- printf "%s:%s@%s" .image.repository $tag .image.digest -}}
{{- else -}}
{{- printf "%s:%s" .image.repository $tag -}}
{{- end -}}
{{- end }}

{{/*
The namespaces `portico serve` watches: watchNamespaces, plus the release namespace (the
envoy Service's address is read there), as the kubelet expands $(POD_NAMESPACE).
*/}}
{{- define "portico.watchNamespaces" -}}
{{- $ns := .Values.watchNamespaces -}}
{{- if has .Release.Namespace $ns -}}
{{- join "," $ns -}}
{{- else -}}
{{- join "," (append $ns "$(POD_NAMESPACE)") -}}
{{- end -}}
{{- end }}
