//! The watches of one cluster: one per kind palisade installs, each telling the controller
//! what changed that palisade did not change.

use super::*;

/// The watches of one cluster; dropping it stops them.
#[derive(Debug)]
pub struct DriftWatch {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    health: Arc<Mutex<Health>>,
}

impl Drop for DriftWatch {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl DriftWatch {
    /// Starts the watches of `cluster` with `client`; what they see goes to `seen`.
    pub fn start(
        client: &Client,
        cluster: &str,
        installation: &str,
        seen: mpsc::Sender<Seen>,
    ) -> Self {
        let ours = watcher::Config::default()
            .labels(&format!(
                "{MANAGED_BY_LABEL}=palisade,{INSTALLATION_LABEL}={installation}"
            ))
            .timeout(WATCH_TIMEOUT_SECONDS);
        let health = Arc::new(Mutex::new(Health::default()));
        let context = Context {
            cluster: cluster.to_owned(),
            installation: installation.to_owned(),
            seen,
            health: health.clone(),
        };
        let policies = Api::<ValidatingAdmissionPolicy>::all(client.clone());
        let bindings = Api::<ValidatingAdmissionPolicyBinding>::all(client.clone());
        let definitions = Api::<CustomResourceDefinition>::all(client.clone());
        let namespaces = Api::<Namespace>::all(client.clone());
        let definition = watcher::Config::default()
            .fields(&format!("metadata.name={PARAMS_CRD}"))
            .timeout(WATCH_TIMEOUT_SECONDS);
        let labelled = watcher::Config::default()
            .labels(BOUNDARY_LABEL)
            .timeout(WATCH_TIMEOUT_SECONDS);
        let (established, settled) = tokio::sync::watch::channel(None);
        let tasks = vec![
            tokio::spawn(objects(
                watcher(policies, ours.clone()).default_backoff().boxed(),
                context.clone(),
                DriftKind::Policy,
            )),
            tokio::spawn(objects(
                watcher(bindings, ours.clone()).default_backoff().boxed(),
                context.clone(),
                DriftKind::Binding,
            )),
            tokio::spawn(self::definition(
                watcher(definitions, definition).default_backoff().boxed(),
                context.clone(),
                established,
            )),
            // Without a label selector: on 1.37 a watch of the parameter objects by label was
            // seen to list and then hear nothing at all; unselected, it hears every change.
            // Other installations' objects are told apart by their label.
            tokio::spawn(parameters(
                client.clone(),
                watcher::Config::default().timeout(WATCH_TIMEOUT_SECONDS),
                context.clone(),
                settled,
            )),
            tokio::spawn(labels(
                watcher(namespaces, labelled).default_backoff().boxed(),
                context,
            )),
        ];
        DriftWatch { tasks, health }
    }

    /// Whether every watch has listed its objects once (the parameter objects' only while
    /// their definition is established).
    pub fn is_ready(&self) -> bool {
        self.health.lock().is_ok_and(|h| {
            let base = [
                DriftKind::Policy,
                DriftKind::Binding,
                DriftKind::Definition,
                DriftKind::NamespaceLabel,
            ];
            base.iter().all(|k| h.listed.contains(k))
                && (!h.parameters || h.listed.contains(&DriftKind::Parameters))
        })
    }

    /// The latest failure of a watch (each is retried with backoff), e.g. a 403 when palisade
    /// may not watch a kind.
    pub fn error(&self) -> Option<String> {
        self.health.lock().ok().and_then(|h| h.error.clone())
    }
}

/// What one watch of palisade's objects of one kind has seen.
struct Objects {
    kind: DriftKind,
    /// Its first list is complete.
    listed: bool,
}

impl Objects {
    fn new(kind: DriftKind) -> Self {
        Objects {
            kind,
            listed: false,
        }
    }

    /// What `event` tells the controller, if anything.
    fn on<K: Resource>(
        &mut self,
        context: &Context,
        event: Result<watcher::Event<K>, watcher::Error>,
    ) -> Option<Seen> {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                context.failed(self.kind, &error);
                return None;
            }
        };
        let drift = match event {
            watcher::Event::InitDone => {
                context.listed(self.kind);
                let again = std::mem::replace(&mut self.listed, true);
                return again.then(|| context.relisted());
            }
            watcher::Event::Init | watcher::Event::InitApply(_) => None,
            watcher::Event::Delete(object) => {
                let meta = object.meta();
                if crate::deletions::deleted_by_palisade(meta.uid.as_deref()) {
                    None
                } else {
                    drift_of(context, self.kind, meta, Happened::Deleted)
                }
            }
            watcher::Event::Apply(object) => {
                let meta = object.meta();
                changed_by(meta)
                    .and_then(|by| drift_of(context, self.kind, meta, Happened::Changed { by }))
            }
        }?;
        tracing::warn!(cluster = %context.cluster, what = drift.what(), "drift");
        Some(Seen::Drift(drift))
    }
}

/// Follows one kind of palisade's objects.
async fn objects<K>(
    mut events: BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>,
    context: Context,
    kind: DriftKind,
) where
    K: Resource + Send + 'static,
{
    let mut objects = Objects::new(kind);
    while let Some(event) = events.next().await {
        if let Some(seen) = objects.on(&context, event) {
            context.tell(seen);
        }
    }
}

/// Follows the parameters' definition; `established` carries its resource version while it is
/// established (`None` otherwise), for [`parameters`].
async fn definition(
    mut events: BoxStream<
        'static,
        Result<watcher::Event<CustomResourceDefinition>, watcher::Error>,
    >,
    context: Context,
    established: tokio::sync::watch::Sender<Option<String>>,
) {
    let mut definition = Objects::new(DriftKind::Definition);
    while let Some(event) = events.next().await {
        match &event {
            Ok(watcher::Event::Apply(crd) | watcher::Event::InitApply(crd)) => {
                let version = crate::cluster::established(crd)
                    .then(|| crd.metadata.resource_version.clone())
                    .flatten();
                established.send_if_modified(|current| {
                    let changed = *current != version;
                    *current = version;
                    changed
                });
            }
            Ok(watcher::Event::Delete(_)) => {
                established.send_if_modified(|current| current.take().is_some());
            }
            _ => {}
        }
        if let Some(seen) = definition.on(&context, event) {
            context.tell(seen);
        }
    }
}

/// Follows the parameter objects while their definition is established, from a watch begun
/// again whenever the definition changes: a watch of a resource whose definition is replaced
/// or still settling may hear nothing.
async fn parameters(
    client: Client,
    config: watcher::Config,
    context: Context,
    mut established: tokio::sync::watch::Receiver<Option<String>>,
) {
    let api = Api::<DynamicObject>::all_with(client, &crate::shared::params_resource());
    loop {
        let current = established.borrow_and_update().clone();
        if let Ok(mut health) = context.health.lock() {
            health.parameters = current.is_some();
            health.listed.remove(&DriftKind::Parameters);
        }
        if current.is_none() {
            if established.changed().await.is_err() {
                return;
            }
            continue;
        }
        let mut objects = Objects::new(DriftKind::Parameters);
        let mut events = watcher(api.clone(), config.clone())
            .default_backoff()
            .boxed();
        loop {
            tokio::select! {
                changed = established.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    break;
                }
                event = events.next() => {
                    let Some(event) = event else { break };
                    if let Some(seen) = objects.on(&context, event) {
                        context.tell(seen);
                    }
                }
            }
        }
    }
}

/// Follows the boundary label of every labelled namespace. A namespace leaving the label
/// selector is a watch `DELETED` event with its labels as they were; a namespace that was
/// deleted carries its deletion timestamp.
async fn labels(
    mut events: BoxStream<'static, Result<watcher::Event<Namespace>, watcher::Error>>,
    context: Context,
) {
    let mut labelled: BTreeMap<String, String> = BTreeMap::new();
    let mut listing: BTreeMap<String, String> = BTreeMap::new();
    let mut listed = false;
    let label = |namespace: &Namespace| {
        namespace
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(BOUNDARY_LABEL).cloned())
    };
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                context.failed(DriftKind::NamespaceLabel, &error);
                continue;
            }
        };
        let drift = match event {
            watcher::Event::Init => {
                listing.clear();
                None
            }
            watcher::Event::InitApply(namespace) => {
                if let (Some(name), Some(value)) =
                    (namespace.metadata.name.clone(), label(&namespace))
                {
                    listing.insert(name, value);
                }
                None
            }
            watcher::Event::InitDone => {
                context.listed(DriftKind::NamespaceLabel);
                labelled = std::mem::take(&mut listing);
                if listed {
                    context.tell(context.relisted());
                }
                listed = true;
                None
            }
            watcher::Event::Apply(namespace) => {
                let (Some(name), Some(value)) =
                    (namespace.metadata.name.clone(), label(&namespace))
                else {
                    continue;
                };
                match labelled.insert(name.clone(), value.clone()) {
                    Some(before) if before != value => Some(context.label_drift(
                        name,
                        Happened::LabelChanged { to: value },
                        before,
                    )),
                    _ => None,
                }
            }
            watcher::Event::Delete(namespace) => {
                let Some(name) = namespace.metadata.name.clone() else {
                    continue;
                };
                let before = labelled.remove(&name).or_else(|| label(&namespace));
                match before {
                    Some(before) if namespace.metadata.deletion_timestamp.is_none() => {
                        Some(context.label_drift(name, Happened::LabelRemoved, before))
                    }
                    Some(_) => {
                        context.tell(Seen::NamespaceDeleted {
                            cluster: context.cluster.clone(),
                            namespace: name,
                        });
                        None
                    }
                    None => None,
                }
            }
        };
        if let Some(drift) = drift {
            tracing::warn!(cluster = %context.cluster, what = drift.what(), "drift");
            context.tell(Seen::Drift(drift));
        }
    }
}
