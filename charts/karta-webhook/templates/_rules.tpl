{{/*
The workloads webhook's rules for the bundled catalog's kinds (as manifests/base/webhooks.yaml:
resources sorted, rules sorted by group then version; tests/test_chart.py holds them equal), so
that the first install already mutates them. The leader keeps them equal to the kinds it has
definitions for unless manageWebhooks is false.
*/}}
{{- define "karta-webhook.catalogRules" -}}
- {apiGroups: [""], apiVersions: ["v1"], resources: [pods]}
- {apiGroups: ["agents.x-k8s.io"], apiVersions: ["v1alpha1"], resources: [sandboxes]}
- {apiGroups: ["agents.x-k8s.io"], apiVersions: ["v1beta1"], resources: [sandboxes]}
- {apiGroups: ["apps"], apiVersions: ["v1"], resources: [daemonsets, deployments, replicasets, statefulsets]}
- {apiGroups: ["apps.nvidia.com"], apiVersions: ["v1alpha1"], resources: [nimcaches, nimservices]}
- {apiGroups: ["argoproj.io"], apiVersions: ["v1alpha1"], resources: [workflows]}
- {apiGroups: ["batch"], apiVersions: ["v1"], resources: [cronjobs, jobs]}
- {apiGroups: ["batch.volcano.sh"], apiVersions: ["v1alpha1"], resources: [jobs]}
- {apiGroups: ["grove.io"], apiVersions: ["v1alpha1"], resources: [podcliquesets]}
- {apiGroups: ["jobset.x-k8s.io"], apiVersions: ["v1alpha2"], resources: [jobsets]}
- {apiGroups: ["kubeflow.org"], apiVersions: ["v1"], resources: [jaxjobs, notebooks, paddlejobs, pytorchjobs, tfjobs, xgboostjobs]}
- {apiGroups: ["kubeflow.org"], apiVersions: ["v2beta1"], resources: [mpijobs]}
- {apiGroups: ["leaderworkerset.x-k8s.io"], apiVersions: ["v1"], resources: [leaderworkersets]}
- {apiGroups: ["milvus.io"], apiVersions: ["v1beta1"], resources: [milvuses]}
- {apiGroups: ["nvidia.com"], apiVersions: ["v1alpha1"], resources: [dynamographdeployments]}
- {apiGroups: ["nvidia.com"], apiVersions: ["v1beta1"], resources: [dynamographdeployments]}
- {apiGroups: ["ray.io"], apiVersions: ["v1"], resources: [rayclusters, rayjobs, rayservices]}
- {apiGroups: ["serving.knative.dev"], apiVersions: ["v1"], resources: [services]}
- {apiGroups: ["serving.kserve.io"], apiVersions: ["v1alpha1"], resources: [llminferenceservices]}
- {apiGroups: ["serving.kserve.io"], apiVersions: ["v1beta1"], resources: [inferenceservices]}
- {apiGroups: ["sparkoperator.k8s.io"], apiVersions: ["v1beta2"], resources: [sparkapplications]}
- {apiGroups: ["tekton.dev"], apiVersions: ["v1"], resources: [taskruns]}
- {apiGroups: ["trainer.kubeflow.org"], apiVersions: ["v1alpha1"], resources: [trainjobs]}
{{- end }}
