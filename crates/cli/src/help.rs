//! Help texts: the `Examples:` blocks shown after each command's help, and the values that
//! options taking a role or a resource type accept.

use clap::builder::{PossibleValue, PossibleValuesParser};
use palisade_policy::ResourceType;

/// The roles a token can have (SPEC 4.1), with what each may do.
pub fn roles() -> PossibleValuesParser {
    PossibleValuesParser::new([
        PossibleValue::new("admin").help("everything, in every boundary (no --boundary)"),
        PossibleValue::new("boundary-admin").help(
            "a boundary's policies, namespaces, resources and developer tokens (needs --boundary)",
        ),
        PossibleValue::new("developer")
            .help("a boundary's resources and plans; reads its policies (needs --boundary)"),
    ])
}

/// What the compute-plan rule does with a type, for its help line.
fn type_help(ty: ResourceType) -> &'static str {
    if ty.is_plan_checked() {
        "plans checked against the boundary's policies"
    } else if ty.has_plans() {
        "has plans; they are never checked"
    } else {
        "takes no plan"
    }
}

/// The platform's resource types, spelled as the API spells them.
pub fn resource_types() -> PossibleValuesParser {
    PossibleValuesParser::new(
        ResourceType::ALL.map(|ty| PossibleValue::new(ty.as_str()).help(type_help(ty))),
    )
}

pub const MAIN: &str = "\
Examples:
  # Run palisade with a demo boundary, then point the client commands at it
  palisade serve --demo
  export PALISADE_URL=http://127.0.0.1:8080 PALISADE_TOKEN=$(cat .palisade/admin.token)

  # Save policies from git, then see them and their install status
  palisade apply -f policies/
  palisade get policies shop

  # Check manifests offline before they reach a cluster
  palisade check -p policies/ manifests/

  # A server behind HTTPS whose certificate a private CA signed
  export PALISADE_URL=https://palisade.example.internal PALISADE_CA_FILE=platform-ca.pem

  # Or name servers as contexts in a config file, and switch between them
  palisade config set-context prod --url https://palisade.example.internal --token \"$(cat prod.token)\"
  palisade config use-context prod

Client commands read the server from PALISADE_URL (or --url), the token from PALISADE_TOKEN
(or --token), and for https:// a private CA's certificates (PEM) from PALISADE_CA_FILE (or
--ca-file), trusted besides the built-in and system ones; what these leave unset comes from
the config file's current context (or --context NAME; see palisade config --help).";

pub const CHECK: &str = "\
Examples:
  # Check every manifest in a directory against a directory of policies
  palisade check -p policies/ manifests/

  # Several policy files; one line per denial on standard output
  palisade check -p size-limits.yaml -p trusted.yaml web.yaml

  # Rendered manifests from standard input, one JSON element per object
  helm template web ./chart | palisade check -p policies/ -o json -

  # Would the policies allow an app on the large plan?
  palisade check plan -p policies/ --type app --plan large

Exit codes: 0 every object admitted (audit warnings allowed), 1 something denied, 2 bad input
(2 wins over 1). A summary `checked N objects: M denied` goes to standard error. A manifest
file named plan is written ./plan.";

pub const TEST: &str = "\
Examples:
  # Every PolicyTest document under tests/ (searched recursively)
  palisade test tests/

  # A JUnit XML report for the CI system's test view
  palisade test -o junit tests/ > palisade-tests.xml

  # A test file: paths are relative to it
  cat tests/shop.yaml
  apiVersion: palisade.dev/v1
  kind: PolicyTest
  metadata:
    name: shop
  spec:
    policies: [../policies/]
    cases:
      - name: an app on the large plan is refused
        resource: {type: app, name: web, plan: large}
        expect:
          verdict: denied
          message: \"Compute plan 'large' is not allowed in this boundary: a boundary policy disallows it. Allowed plans: small, medium.\"
      - name: the web Deployment from the chart is admitted
        file: ../manifests/web.yaml
        expect: {verdict: admitted}

A case is one of `object` (a manifest inline), `file` (+ `document`, 0-based) or `resource`
(type, plan, name). `expect`: `verdict` (admitted or allowed, or denied), and optionally
`message` (exactly one denial's), `policy` (a denying policy), `warnings` (the exact audit
warnings), `exceptedBy` (the exception that lets it past). `at` fixes the time exceptions
are judged at.

Exit codes: 0 every case passed, 1 a case failed, 2 bad input (2 wins over 1).";

pub const CHECK_PLAN: &str = "\
Examples:
  # Prints `allowed` (exit 0) or the API's exact 422 message (exit 1)
  palisade check plan -p policies/ --type app --plan large

  # A database type, with a catalog file instead of the built-in catalog
  palisade check plan -p size-limits.yaml --type postgresql --plan memory-optimized --catalog catalog.yaml

Exit codes: 0 allowed, 1 denied, 2 bad input.";

pub const SERVE: &str = "\
Examples:
  # SQLite in ./.palisade, the API and portal on 127.0.0.1:8080, a demo boundary 'shop'
  palisade serve --demo

  # PostgreSQL, which several replicas can share, on every interface
  palisade serve --database postgres://palisade@db/palisade --listen 0.0.0.0:8080

  # HTTPS itself (PEM files); the client commands then take https:// (and --ca-file when a
  # private CA signed the certificate)
  palisade serve --tls-cert tls.crt --tls-key tls.key

The first start writes an admin token to <data-dir>/admin.token (mode 0600).";

pub const APPLY: &str = "\
Examples:
  # Create or update the policies in a file
  palisade apply -f size-limits.yaml

  # Every *.yaml and *.yml file in a directory, all or nothing
  palisade apply -f policies/

  # Show what would change and what each policy would deny in the clusters; write nothing
  palisade apply -f policies/ --dry-run

  # From standard input: a policy read back from the server applies unchanged
  palisade get policy shop/size-limits -o yaml | palisade apply -f -

Prints one line per policy: `boundarypolicy shop/size-limits created` (configured, unchanged),
and the save warnings on standard error.";

pub const PREVIEW: &str = "\
Examples:
  # What a new or changed policy would deny among what the boundary already runs
  palisade preview -f no-latest.yaml

  # As JSON, for a script ({\"items\": [one preview per document]})
  palisade preview -f policies/ -o json

Prints one summary line per policy, then one line per finding:
  preview shop/no-latest (enforce): 2 denied (1 workloads, 2 replicas at risk), 0 warned, 0 loosened, 0 resources grandfathered; clusters read: prod-1
  denied prod-1 team-a/Deployment/web (2 replicas): Policy 'no-latest' (DisallowLatestTag) denied image nginx:latest: it is tagged latest or carries no tag.
  denied prod-1 team-a/Pod/web-5d9c-x2 (Deployment/web, 2 replicas): Policy 'no-latest' ...
(`warned` in audit mode; `loosened` for what the saved version denies and this one allows;
`grandfathered TYPE/NAME (PLANS)` for resources whose plan it disallows; `unreadable CLUSTER`).
Exit 0 when nothing would be denied, 1 when something would, 2 when the preview could not be
made.";

pub const ROLLBACK: &str = "\
Examples:
  # See the versions of a policy, then put version 2's spec back
  palisade describe policy shop/trusted
  palisade rollback shop/trusted --to 2

A rollback is a change like any other: it makes a new version, is in the history, and is in
force in the clusters as a save of that spec would be. A version pruned from the history
(serve --history-days) can no longer be rolled back to.";

pub const ROLLOUT: &str = "\
Examples:
  # Where the rollout of shop/trusted is
  palisade rollout status shop/trusted

  # On to the next stage now, or back to the previous version everywhere
  palisade rollout promote shop/trusted
  palisade rollout abort shop/trusted

Prints one line:
  boundarypolicy shop/trusted rolling out v4: stage 2/3, 0 denials, next 14:00
  boundarypolicy shop/trusted promoted: rolling out v4: stage 3/3, 0 denials, waits for promote
  boundarypolicy shop/trusted aborted: v4 aborted: v3 in force
Times are UTC. A rollout is started by saving a policy with spec.rollout; a change during a
rollout starts it again from its first stage, over the last version that reached everywhere.";

pub const DIFF: &str = "\
Examples:
  # What applying a directory of policies would change
  palisade diff -f policies/

  # In CI: exit 1 when the stored policies are not what git holds (2: could not compare)
  palisade diff -f policies/

  # From standard input
  palisade get policy shop/size-limits -o yaml | palisade diff -f -

Prints one unified diff per document that apply would change, the stored document first:
  --- boundarypolicy shop/size-limits (live)
  +++ boundarypolicy shop/size-limits (policies/size-limits.yaml:0)
  @@ -9,6 +9,7 @@
     - allowedComputePlans:
         plans:
         - small
  +      - medium
     - allowedRegistries:
         registries:
         - docker.io/library
A document not stored yet is compared with nothing (`(not stored)`, every line added). Both
sides are written as the server stores them (as `get policy -o yaml` prints them), so a
registry prefix's trailing / or an omitted mode is no difference. The save warnings of the
documents that would change go to standard error. diff asks the server what apply would do
(POST /v1/apply?dry_run=true), so its token must be one that may apply (admin or
boundary-admin). Exit 0 when nothing differs, 1 when something does, 2 on bad input or a
server that cannot be asked.";

pub const GET: &str = "\
Examples:
  # Boundaries, clusters and tokens the token can see
  palisade get boundaries
  palisade get clusters
  palisade get tokens

  # A boundary's policies with their install status, and one of them as a document
  palisade get policies shop
  palisade get policy shop/size-limits -o yaml

  # A boundary's resources; those whose plan a policy now disallows
  palisade get resources shop --type app
  palisade get resources shop --grandfathered

  # The plan picker: which app plans the policies allow
  palisade get plans shop --type app

  # Names only, one a line, as the other commands take them; more columns
  palisade get policies shop -o name | xargs -n1 palisade describe policy
  palisade get resources shop -o wide

  # Keep watching: a line for every resource that is new or changes, until Ctrl-C
  palisade get resources shop --watch
  palisade get policies shop -w -o json     # one JSON object per line

Object types: boundaries, clusters, policies, policy, resources, namespaces, tokens, plans.
-o name prints boundary/NAME, cluster/NAME and token/ID for the platform's objects, and
BOUNDARY/NAME (resources: BOUNDARY/TYPE/NAME) for a boundary's. -o wide adds columns to
policies (UPDATED BY, LABELS), resources (IMAGE, PLACEMENT, REPLICAS, LABELS), exceptions
(REASON) and tokens (CREATED BY); other lists print their usual table. --watch reads the list
every second and prints a line (a row, a JSON object, a YAML document or a name) for each
object that is new or whose row changed; deletions print nothing.";

pub const GET_BOUNDARIES: &str = "\
Examples:
  palisade get boundaries
  palisade get boundaries -o json";

pub const GET_CLUSTERS: &str = "\
Examples:
  # Name, Kubernetes version, whether admission rules are enforced there, last error, and
  # the admission layout in use and why (e.g. shared: 212 boundaries)
  palisade get clusters";

pub const GET_POLICIES: &str = "\
Examples:
  palisade get policies shop
  palisade get policies shop -o yaml    # the API's list body";

pub const GET_EXCEPTIONS: &str = "\
Examples:
  palisade get exceptions shop
  palisade get exception shop/legacy-nginx -o yaml > legacy-nginx.yaml
  palisade apply -f legacy-nginx.yaml   # BoundaryException documents go beside policies";

pub const GET_POLICY: &str = "\
Examples:
  # As a table row
  palisade get policy shop/size-limits

  # As a BoundaryPolicy document that `palisade apply -f` takes back unchanged
  palisade get policy shop/size-limits -o yaml > size-limits.yaml
  palisade apply -f size-limits.yaml

With -o yaml or -o json the output is the document (apiVersion, kind, metadata, spec), not the
API's body.";

pub const GET_REPORT: &str = "\
Examples:
  # What the last audit found for a policy, per cluster, then each object
  palisade get report shop/no-latest

  # The API's body, for a script
  palisade get report shop/no-latest -o json

After the table, one line per violating object:
  prod-1 team-a/Pod/web-5d9c-x2 (Deployment/web, 2 replicas): Policy 'no-latest' ...
Clusters that serve openreports.io/v1alpha1 also hold the results as Report objects, one per
namespace and policy (`kubectl get reports -A`).";

pub const GET_RESOURCE: &str = "\
Examples:
  palisade get resource shop/app/web
  palisade get resource shop/app/web -o wide      # with image, placement, replicas, labels
  palisade get resource shop/app/web -o yaml      # the API's body
  palisade describe resource shop/app/web         # with its pods and events, read from the cluster";

pub const GET_RESOURCES: &str = "\
Examples:
  palisade get resources shop
  palisade get resources shop --type container_instance
  palisade get resources shop --grandfathered     # with the policies that disallow them

  # By label: team web, not in tier front, with an owner label at all
  palisade get resources shop -l team=web,tier!=front,owner

  # Image, placement, replicas and labels too; or only the names (shop/app/web)
  palisade get resources shop -o wide
  palisade get resources shop -l '!owner' -o name

-l takes key=value (or key==value), key!=value (true as well where the label is absent), key
(the label is there) and !key (it is not), separated by commas; all must hold. The client
filters the list (the API has no label query).";

pub const GET_TOKENS: &str = "\
Examples:
  palisade get tokens
  palisade get tokens -o json";

pub const GET_NAMESPACES: &str = "\
Examples:
  palisade get namespaces shop";

pub const GET_PLANS: &str = "\
Examples:
  palisade get plans shop --type app
  palisade get plans shop --type valkey -o json";

pub const DELETE: &str = "\
Examples:
  palisade delete policy shop/size-limits
  palisade delete resource shop/app/web
  palisade delete namespace shop/web --cluster prod-1
  palisade delete cluster prod-1
  palisade delete token 5f0c2d
  palisade delete boundary shop      # refused (409) while it has resources, policies or namespaces

  # For a script: what was deleted, as JSON
  palisade delete policy shop/size-limits -o json

Prints `boundarypolicy shop/size-limits deleted`; with -o json|yaml (the API answers a delete
with no body) {\"kind\": \"policy\", \"boundary\": \"shop\", \"name\": \"size-limits\", \"action\": \"deleted\"},
each kind with the names that say what (resource: boundary, type, name; namespace: boundary,
cluster, name; token: id).";

pub const DELETE_BOUNDARY: &str = "\
Examples:
  palisade delete boundary web-team";

pub const DELETE_POLICY: &str = "\
Examples:
  palisade delete policy shop/size-limits";

pub const DELETE_RESOURCE: &str = "\
Examples:
  palisade delete resource shop/app/web
  palisade delete resource shop/postgresql/orders";

pub const DELETE_TOKEN: &str = "\
Examples:
  # The id is the ID column of `palisade get tokens`
  palisade delete token 5f0c2d";

pub const DELETE_CLUSTER: &str = "\
Examples:
  palisade delete cluster prod-1
  palisade delete cluster prod-1 --force    # it cannot be reached; its objects stay there";

pub const DELETE_NAMESPACE: &str = "\
Examples:
  # Removes the boundary label; the namespace itself stays
  palisade delete namespace shop/web --cluster prod-1";

pub const RESOURCE: &str = "\
Examples:
  palisade resource create shop --type app --name web --plan small --image ghcr.io/acme/web:1.4
  palisade resource create shop --type postgresql --name orders --plan medium
  palisade resource update shop/app/web --plan medium";

pub const RESOURCE_CREATE: &str = "\
Examples:
  # An app; a plan the boundary's policies disallow is refused with the API's 422 message
  palisade resource create shop --type app --name web --plan small --image ghcr.io/acme/web:1.4 --label team=web

  # A container instance: one plan per component
  palisade resource create shop --type container_instance --name batch \\
    --component worker:small:ghcr.io/acme/worker:2.0 --component cron:small:ghcr.io/acme/cron:2.0

  # A database, a cache, a vector store: a plan only
  palisade resource create shop --type valkey --name cache --plan small";

pub const RESOURCE_UPDATE: &str = "\
Examples:
  # Move to another plan (checked against the policies)
  palisade resource update shop/app/web --plan medium

  # Any other change is never refused by the compute-plan rule
  palisade resource update shop/app/web --image ghcr.io/acme/web:1.5 --label team=web

  # Replace a container instance's components
  palisade resource update shop/container_instance/batch --component worker:medium:ghcr.io/acme/worker:2.1";

pub const TOKEN: &str = "\
Examples:
  palisade token create --role developer --boundary shop --expires-in-days 30
  palisade token list
  palisade token revoke 5f0c2d";

pub const TOKEN_CREATE: &str = "\
Examples:
  # A developer token for one boundary, valid 30 days (the secret is printed once)
  palisade token create --role developer --boundary shop --expires-in-days 30

  # A boundary admin (admin tokens only)
  palisade token create --role boundary-admin --boundary shop

  # Another admin token
  palisade token create --role admin

Roles: admin, boundary-admin, developer.";

pub const TOKEN_LIST: &str = "\
Examples:
  palisade token list
  palisade token list -o yaml";

pub const TOKEN_REVOKE: &str = "\
Examples:
  palisade token revoke 5f0c2d
  palisade token revoke 5f0c2d -o json   # {\"kind\": \"token\", \"id\": \"5f0c2d\", \"action\": \"deleted\"}";

pub const EXCEPTION: &str = "\
Examples:
  palisade exception request -f legacy-nginx.yaml   # a developer's request
  palisade exception approve shop/legacy-nginx      # a boundary-admin approves it
  palisade get exceptions shop";

pub const EXCEPTION_REQUEST: &str = "\
Examples:
  palisade exception request -f legacy-nginx.yaml
  boundaryexception shop/legacy-nginx requested";

pub const EXCEPTION_APPROVE: &str = "\
It reads the exception first, prints the spec it approves, and approves that version only
(its etag, as If-Match): if the request changed since, the approval is refused (412).

Examples:
  palisade exception approve shop/legacy-nginx";

pub const DESCRIBE: &str = "\
Examples:
  palisade describe exception shop/legacy-nginx
  palisade describe policy shop/trusted
  palisade describe cluster prod-1
  palisade describe exception shop/legacy-nginx -o yaml   # the API's body";

pub const DESCRIBE_EXCEPTION: &str = "\
Examples:
  palisade describe exception shop/legacy-nginx";

pub const DESCRIBE_POLICY: &str = "\
Examples:
  palisade describe policy shop/trusted";

pub const DESCRIBE_RESOURCE: &str = "\
Examples:
  # Status, placement, replicas, pods and the latest Kubernetes events (denials among them)
  palisade describe resource shop/app/web

  # The resource's API body with what its cluster holds under \"workload\"
  palisade describe resource shop/app/web -o json";

pub const DESCRIBE_CLUSTER: &str = "\
Examples:
  palisade describe cluster prod-1";

pub const BOUNDARY: &str = "\
Examples:
  palisade boundary create web-team --display-name 'Web team'";

pub const NAMESPACE: &str = "\
Examples:
  palisade namespace create shop/web --cluster prod-1
  palisade namespace adopt shop/legacy --cluster prod-1";

pub const NAMESPACE_CREATE: &str = "\
Examples:
  # Creates namespace web in cluster prod-1, labelled palisade.dev/boundary=shop
  palisade namespace create shop/web --cluster prod-1";

pub const NAMESPACE_ADOPT: &str = "\
Examples:
  # Labels the existing namespace legacy for boundary shop (admin only; 409 if another
  # boundary has it or its name is reserved: default, kube-*, the cluster's list)
  palisade namespace adopt shop/legacy --cluster prod-1";

pub const CLUSTER: &str = "\
Examples:
  palisade cluster rbac --service-account platform/palisade | kubectl apply -f -
  palisade cluster add prod-1 --kubeconfig prod-1.kubeconfig
  # No boundary may hold these namespaces there (besides default and kube-*)
  palisade cluster add prod-1 --kubeconfig prod-1.kubeconfig --reserve monitoring --reserve ingress
  palisade cluster attach shop prod-1

  # The cluster as the API answers it (name, Kubernetes version, admission)
  palisade cluster attach shop prod-1 -o json";

pub const CLUSTER_ADD: &str = "\
Examples:
  palisade cluster add prod-1 --kubeconfig prod-1.kubeconfig

  # From standard input
  kubectl config view --minify --flatten | palisade cluster add prod-1 --kubeconfig -

The kubeconfig holds one cluster, user and context, an https server and inline credentials
only. It is stored encrypted and never returned.";

pub const CLUSTER_RBAC: &str = "\
Examples:
  # For a kubeconfig with a client certificate whose CN is palisade
  palisade cluster rbac | kubectl apply -f -

  # For a service account's token
  palisade cluster rbac --service-account platform/palisade | kubectl apply -f -

The role grants get, list, create, patch and delete on ValidatingAdmissionPolicies and
their bindings; get, list, create and patch on namespaces; create on pods (server-side dry-runs
only, to confirm enforcement); list on pods, deployments, replicasets, statefulsets, daemonsets,
jobs and cronjobs (previews and audits); for platform workloads, get, create, patch, delete
and watch on deployments, patch on deployments/scale, get, create, delete and watch on jobs,
watch on replicasets, list and watch on events; for the shared admission layout
(serve --admission-layout shared), create and patch on the one custom resource definition
boundarypolicies.palisade.dev and list, watch, create, patch and delete on its BoundaryPolicy
objects; list, create, patch and delete on openreports.io reports (the audit's reports);
create on selfsubjectreviews; get on /metrics (the API server's start time, to notice
restarts). Nothing on Secrets.";

pub const CLUSTER_KUBECONFIG: &str = "\
Examples:
  # 1. In the managed cluster (kubectl's context): the namespace, service account, role,
  #    binding and token Secret
  palisade cluster kubeconfig --service-account palisade/palisade | kubectl apply -f -

  # 2. The kubeconfig with the account's token, registered in palisade
  kubectl get secret palisade-token -n palisade -o json \\
    | palisade cluster kubeconfig --from-secret - \\
        --api-server \"$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')\" \\
    > prod-1.kubeconfig
  palisade cluster add prod-1 --kubeconfig prod-1.kubeconfig

The Secret is named after the account (NAME-token); the cluster's token controller fills in its
token and CA a moment after it is made. The token does not expire: delete the Secret to revoke
it, apply the YAML again for a new one, and run step 2 again. Guide: docs/cluster-access.md.";

pub const CLUSTER_ATTACH: &str = "\
Examples:
  # Policies of shop are then installed in prod-1 (unless their scope leaves it out)
  palisade cluster attach shop prod-1

  # The cluster as the API answers it (name, Kubernetes version, admission)
  palisade cluster attach shop prod-1 -o json";

pub const CONFIG: &str = "\
Examples:
  # Name two servers, with the token and CA file of each, and use prod from now on
  palisade config set-context prod --url https://palisade.example.internal --token \"$(cat prod.token)\" --ca-file platform-ca.pem
  palisade config set-context local --url http://127.0.0.1:8080 --token \"$(cat .palisade/admin.token)\"
  palisade config use-context prod
  palisade get boundaries

  # One command against another context
  palisade get policies shop --context local

  # The contexts, and the file with its tokens redacted
  palisade config get-contexts
  palisade config view

For each of the URL, the token and the CA file, the flag wins, then the PALISADE_URL,
PALISADE_TOKEN or PALISADE_CA_FILE variable, then the context (--context, else the current
one), then the default URL http://127.0.0.1:8080. A context's token is sent only to its own
URL: with another --url or PALISADE_URL, give the token too. The file is YAML, written
atomically and readable by its owner only (0600):
  current-context: prod
  contexts:
    prod:
      url: https://palisade.example.internal
      token: pal_...
      ca-file: /home/me/platform-ca.pem";

pub const CONFIG_SET_CONTEXT: &str = "\
Examples:
  palisade config set-context prod --url https://palisade.example.internal --ca-file platform-ca.pem
  palisade config set-context prod --token \"$(cat prod.token)\"    # only the token changes
  palisade config set-context prod --ca-file ''                   # no CA file any more

Prints `context prod created` (or `updated`).";

pub const CONFIG_USE_CONTEXT: &str = "\
Examples:
  palisade config use-context prod
  palisade get boundaries        # asks prod's server with prod's token";

pub const CONFIG_VIEW: &str = "\
Examples:
  palisade config view
  PALISADE_CONFIG=ci-config.yaml palisade config view";

pub const CONFIG_GET_CONTEXTS: &str = "\
Examples:
  palisade config get-contexts
  CURRENT   NAME    URL                                  TOKEN      CA FILE
  *         prod    https://palisade.example.internal    REDACTED   /home/me/platform-ca.pem
            local   http://127.0.0.1:8080                REDACTED   -";

pub const VERSION: &str = "\
Examples:
  # The client's version, and the server's when PALISADE_URL (or --url) is set
  palisade version

  # Only the client's
  palisade version --client

  palisade version -o json";

pub const COMPLETION: &str = "\
Examples:
  # bash: this shell only, or every new shell
  source <(palisade completion bash)
  palisade completion bash > /etc/bash_completion.d/palisade

  # zsh (a directory on $fpath)
  palisade completion zsh > \"${fpath[1]}/_palisade\"

  # fish
  palisade completion fish > ~/.config/fish/completions/palisade.fish";
