{{/* The release's name prefix: the release name if it contains the chart name, else "<release>-<chart>". */}}
{{- define "workerd-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "workerd-operator.labels" -}}
app.kubernetes.io/part-of: workerd-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The manager pods' selector: the same as dist/install.yaml (a Deployment's selector is immutable) and podcontract.ManagerPodLabels, by which the workerd pods' NetworkPolicies admit the manager. */}}
{{- define "workerd-operator.selectorLabels" -}}
app.kubernetes.io/name: workerd-operator
app.kubernetes.io/component: manager
{{- end -}}

{{- define "workerd-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (printf "%s-controller-manager" (include "workerd-operator.fullname" .)) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "workerd-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "workerd-operator.webhookService" -}}
{{- printf "%s-webhook-service" (include "workerd-operator.fullname" .) -}}
{{- end -}}

{{- define "workerd-operator.certSecret" -}}
{{- printf "%s-webhook-server-cert" (include "workerd-operator.fullname" .) -}}
{{- end -}}

{{/*
The webhook configurations' names. Fixed: the manager's certificate rotator injects the CA
bundle into exactly these two (cmd/workerd-operator/manager.go), so one release per cluster.
*/}}
{{- define "workerd-operator.mutatingWebhookName" -}}workerd-operator-mutating-webhook-configuration{{- end -}}
{{- define "workerd-operator.validatingWebhookName" -}}workerd-operator-validating-webhook-configuration{{- end -}}
