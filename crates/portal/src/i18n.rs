//! The portal's languages: English (default) and Swedish, chosen with the `lang` cookie.
//! The portal's own text is translated, and palisade's words around what it quotes: the words
//! of a status (`running`, `rejected`, `enforced`, `pending`, ...), warnings (`warnings.rs`)
//! and the reasons palisade words itself (`reasons.rs`). Error codes, the API's messages
//! (422/503 texts), what a reason quotes, Kubernetes' messages and role names stay English,
//! marked `lang="en"` in the page.

use axum::http::HeaderMap;

use crate::session::{cookie, LANG_COOKIE};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Lang {
    #[default]
    En,
    Sv,
}

impl Lang {
    pub fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Sv => "sv",
        }
    }

    /// The language's name in itself, for the switch.
    pub fn name(self) -> &'static str {
        match self {
            Lang::En => "English",
            Lang::Sv => "Svenska",
        }
    }

    pub fn from_code(code: &str) -> Option<Lang> {
        match code {
            "en" => Some(Lang::En),
            "sv" => Some(Lang::Sv),
            _ => None,
        }
    }

    /// The `lang` cookie's language; English without one.
    pub fn from_headers(headers: &HeaderMap) -> Lang {
        cookie(headers, LANG_COOKIE)
            .and_then(Lang::from_code)
            .unwrap_or_default()
    }

    /// `english` in this language (itself when no translation is known).
    pub fn t(self, english: &'static str) -> &'static str {
        match self {
            Lang::En => english,
            Lang::Sv => swedish(english).unwrap_or(english),
        }
    }
}

fn swedish(english: &str) -> Option<&'static str> {
    Some(match english {
        "deploying" => "driftsätts",
        "pending" => "väntar",
        "installed" => "installerad",
        "enforced" => "upprätthålls",
        "active (audit)" => "aktiv (audit)",
        "error" => "fel",
        "not enforced" => "upprätthålls inte",
        "not checked yet" => "inte kontrollerad ännu",
        "created" => "skapad",
        "configured" => "ändrad",
        "unchanged" => "oförändrad",
        "running" => "körs",
        "rejected" => "nekad",
        "degraded" => "försämrad",
        "replicas; pods rejected" => "repliker; poddar nekade",
        "build rejected" => "bygget nekat",
        "build failed" => "bygget misslyckades",
        "not deployed" => "inte driftsatt",
        "Actions" => "Åtgärder",
        "Place it" => "Placera den",
        "Disallowed by boundary policy" => "Otillåten enligt boundary-policyn",
        "Disallowed by boundary policies" => "Otillåten enligt boundary-policyerna",
        "Tokens" => "Token",
        "Clusters and namespaces" => "Kluster och namnrymder",
        "clusters and namespaces" => "kluster och namnrymder",
        "The token (shown once; it is stored only as a hash):" => "Tokenet (visas en gång; det lagras bara som en hash):",
        "Create a boundary" => "Skapa en boundary",
        "Lower-case letters, digits and '-', at most 63." => "Små bokstäver, siffror och '-', högst 63.",
        "(optional)" => "(valfritt)",
        "Create the boundary" => "Skapa boundaryn",
        "Created boundary" => "Skapade boundaryn",
        "Registered cluster" => "Registrerade klustret",
        "Replaced the credentials of cluster" => "Bytte inloggningsuppgifterna för klustret",
        "No cluster is registered yet." => "Inget kluster är registrerat än.",
        "Reconciled by" => "Hanteras av",
        "Last error" => "Senaste fel",
        "no replica now" => "ingen replik nu",
        "Register a cluster" => "Registrera ett kluster",
        "A kubeconfig with exactly one cluster, user and context, an https server, and inline credentials (certificate-authority-data; client-certificate-data and client-key-data, or a token). It is stored encrypted and never shown again. palisade needs the RBAC that this command prints:" => "En kubeconfig med exakt ett kluster, en användare och en kontext, en https-server och inbäddade uppgifter (certificate-authority-data; client-certificate-data och client-key-data, eller ett token). Den lagras krypterad och visas aldrig igen. palisade behöver den RBAC som detta kommando skriver ut:",
        "Kubeconfig (YAML)" => "Kubeconfig (YAML)",
        "Register the cluster" => "Registrera klustret",
        "Attached cluster" => "Kopplade klustret",
        "Adopted namespace" => "Adopterade namnrymden",
        "Namespace already the boundary's:" => "Namnrymden var redan boundaryns:",
        "Created namespace" => "Skapade namnrymden",
        "Released namespace" => "Släppte namnrymden",
        "No namespace of this boundary here yet." => "Ingen namnrymd för denna boundary här än.",
        "Release" => "Släpp",
        "Create or adopt a namespace" => "Skapa eller adoptera en namnrymd",
        "Adopt it if it exists (label it for this boundary)" => "Adoptera den om den finns (märk den för denna boundary)",
        "Create or adopt" => "Skapa eller adoptera",
        "Attach a cluster" => "Koppla ett kluster",
        "Every registered cluster is attached." => "Alla registrerade kluster är kopplade.",
        "Attach" => "Koppla",
        "Created token" => "Skapade tokenet",
        "Revoked token" => "Återkallade tokenet",
        "No tokens." => "Inga token.",
        "Role" => "Roll",
        "Expires" => "Går ut",
        "never" => "aldrig",
        "Revoke" => "Återkalla",
        "this session's" => "denna sessions",
        "Create a token" => "Skapa ett token",
        "(none for admin)" => "(ingen för admin)",
        "Expires in days" => "Går ut om dagar",
        "Create the token" => "Skapa tokenet",
        "In the cluster" => "I klustret",
        "The cluster could not be read:" => "Klustret kunde inte läsas:",
        "Placement" => "Placering",
        "Deployment" => "Deployment",
        "ready" => "redo",
        "available" => "tillgängliga",
        "up to date" => "uppdaterade",
        "none in the cluster" => "ingen i klustret",
        "Build" => "Bygge",
        "running build" => "pågår",
        "succeeded" => "klart",
        "failed" => "misslyckades",
        "Pods" => "Poddar",
        "No pods." => "Inga poddar.",
        "Phase" => "Fas",
        "Ready" => "Redo",
        "Restarts" => "Omstarter",
        "Node" => "Nod",
        "yes" => "ja",
        "no" => "nej",
        "Recent events" => "Senaste händelser",
        "No events." => "Inga händelser.",
        "Time" => "Tid",
        "Delete it" => "Ta bort den",
        "Deleted" => "Borttagen:",
        "Deleting it removes its Deployment, its pods and its build Jobs from the cluster: what runs stops. This cannot be undone." => "Att ta bort den tar bort dess Deployment, dess poddar och dess bygg-Jobs från klustret: det som körs stoppas. Det går inte att ångra.",
        "Deleting it removes the resource from the boundary. This cannot be undone." => "Att ta bort den tar bort resursen från boundaryn. Det går inte att ångra.",
        "Add a component row" => "Lägg till en komponentrad",
        "Add a label row" => "Lägg till en etikettrad",
        "Admission layout" => "Admission-layout",
        "Admission rules" => "Admission-regler",
        "Allowed compute plans" => "Tillåtna beräkningsplaner",
        "Allowed registries" => "Tillåtna register",
        "App" => "App",
        "Back to the boundaries" => "Tillbaka till boundaries",
        "Back to the boundary" => "Tillbaka till boundaryn",
        "Boundaries" => "Boundaries",
        "Boundary" => "Boundary",
        "Cancel" => "Avbryt",
        "Choose the type of resource:" => "Välj typ av resurs:",
        "Cluster" => "Kluster",
        "Cluster (optional)" => "Kluster (valfritt)",
        "Clusters" => "Kluster",
        "Clusters in scope" => "Kluster i omfattningen",
        "Comparisons are exact: nginx:1.27 is not under docker.io/library, and a prefix naming a repository does not admit its tagged images." => "Jämförelser är exakta: nginx:1.27 ligger inte under docker.io/library, och ett prefix som namnger ett repository släpper inte in dess taggade avbildningar.",
        "Component name" => "Komponentnamn",
        "Components" => "Komponenter",
        "Compute plans are checked in the whole boundary whatever the scope." => "Beräkningsplaner kontrolleras i hela boundaryn oavsett omfattning.",
        "Compute plans are enforced by palisade's API: nothing is installed in clusters." => "Beräkningsplaner tillämpas av palisades API: inget installeras i klustren.",
        "Container instance" => "Containerinstans",
        "Create" => "Skapa",
        "Create a resource" => "Skapa en resurs",
        "Create another" => "Skapa en till",
        "Create:" => "Skapa:",
        "Created" => "Skapade",
        "Delete" => "Ta bort",
        "Delete policy" => "Ta bort policyn",
        "Delete the policy" => "Ta bort policyn",
        "Delete…" => "Ta bort…",
        "Deleted policy" => "Policyn togs bort:",
        "Deleting a policy removes its rules from the boundary: plans it disallowed become allowed, and its admission rules are removed from the clusters. This cannot be undone; the history keeps the last version." => "När en policy tas bort försvinner dess regler från boundaryn: planer som den inte tillät blir tillåtna, och dess admission-regler tas bort från klustren. Det går inte att ångra; historiken behåller den senaste versionen.",
        "Deny images tagged latest or carrying no tag (a digest is always allowed)" => "Avvisa avbildningar taggade latest eller utan tagg (en digest tillåts alltid)",
        "Disallow the latest tag" => "Förbjud taggen latest",
        "Display name" => "Visningsnamn",
        "Each component has its own plan and image." => "Varje komponent har sin egen plan och avbildning.",
        "Edit" => "Redigera",
        "Edit policy" => "Redigera policyn",
        "Edit resource" => "Redigera resursen",
        "Updated" => "Uppdaterade",
        "Only a move to another plan is checked against the policies; other changes succeed even on a plan that a policy now disallows." => "Bara en flytt till en annan plan kontrolleras mot policyerna; andra ändringar lyckas även på en plan som en policy inte längre tillåter.",
        "(the current plan: keeping it is allowed, moving back to it later is not)" => "(den nuvarande planen: den får behållas, men en flytt tillbaka till den senare tillåts inte)",
        "current plan, kept" => "nuvarande plan, behålls",
        "Either an image or a source." => "Antingen en avbildning eller en källa.",
        "Every cluster attached to the boundary" => "Varje kluster som är kopplat till boundaryn",
        "Fill in the rules this policy has; an empty rule is left out." => "Fyll i de regler som policyn har; en tom regel utelämnas.",
        "Form" => "Formulär",
        "Form rejected" => "Formuläret avvisades",
        "Function" => "Funktion",
        "Grandfathered resources" => "Resurser som behåller en otillåten plan",
        "Image" => "Avbildning",
        "Image of component" => "Avbildning för komponent",
        "enforced: a violating object was denied in a namespace of the boundary; installed: no namespace to confirm it in yet; pending: not yet applied." => "upprätthålls: ett objekt som bryter mot policyn nekades i ett namnområde i boundaryn; installerad: inget namnområde att bekräfta i ännu; väntar: inte tillämpad ännu.",
        "Last repair" => "Senaste reparation",
        "Last attempt failed" => "Senaste försöket misslyckades",
        "Key" => "Nyckel",
        "Kubernetes version" => "Kubernetes-version",
        "Label key" => "Etikettnyckel",
        "Label value" => "Etikettvärde",
        "Labels" => "Etiketter",
        "Labels go on the workload and its pods, where required-label rules check them." => "Etiketterna sätts på arbetslasten och dess poddar, där regler om obligatoriska etiketter kontrollerar dem.",
        "Language" => "Språk",
        "Line" => "Rad",
        "Lowercase letters, digits and '-', at most 63 characters." => "Små bokstäver, siffror och '-', högst 63 tecken.",
        "Main" => "Huvudmeny",
        "Mode" => "Läge",
        "Name" => "Namn",
        "Namespace (optional)" => "Namnrymd (valfritt)",
        "New policy" => "Ny policy",
        "New resource" => "Ny resurs",
        "Next page" => "Nästa sida",
        "No boundaries yet." => "Inga boundaries än.",
        "No cluster is attached to this boundary." => "Inget kluster är kopplat till den här boundaryn.",
        "No policies yet." => "Inga policyer än.",
        "No resources yet." => "Inga resurser än.",
        "None." => "Inga.",
        "Not allowed" => "Inte tillåten",
        "Not found" => "Hittades inte",
        "more warnings are not shown here." => "varningar till visas inte här.",
        "There is no page at" => "Det finns ingen sida på",
        "Nothing was changed. Please try again in a few seconds." => "Inget ändrades. Försök igen om några sekunder.",
        "Now disallowed by" => "Inte längre tillåten enligt",
        "Only these clusters:" => "Bara dessa kluster:",
        "Plan" => "Plan",
        "Plan of component" => "Plan för komponent",
        "Plans (one per line or separated by commas; typed entries such as valkey/small apply to one type)" => "Planer (en per rad eller åtskilda med komma; poster med typ, som valkey/small, gäller bara den typen)",
        "Policies" => "Policyer",
        "Exceptions" => "Undantag",
        "Exceptions ending within 7 days" => "Undantag som upphör inom 7 dagar",
        "until" => "till",
        "Policy name" => "Policyns namn",
        "PostgreSQL database" => "PostgreSQL-databas",
        "Qdrant vector store" => "Qdrant-vektorlager",
        "Registry prefixes (one per line, e.g. ghcr.io/acme)" => "Registerprefix (ett per rad, t.ex. ghcr.io/acme)",
        "Required labels" => "Obligatoriska etiketter",
        "Resources" => "Resurser",
        "Namespace" => "Namnrymd",
        "Object" => "Objekt",
        "Workload" => "Arbetslast",
        "Replicas" => "Repliker",
        "Message" => "Meddelande",
        "Preview" => "Förhandsgranska",
        "Preview YAML" => "Förhandsgranska YAML",
        "Would deny" => "Skulle neka",
        "objects of" => "objekt i",
        "workloads" => "arbetslaster",
        "replicas at risk" => "repliker i riskzonen",
        "warned" => "med varning",
        "allowed that the saved version denies" => "tillåtna som den sparade versionen nekar",
        "resources whose plan it disallows" => "resurser vars plan den inte tillåter",
        "No attached cluster is in the policy's scope, or it has no admission rules." => "Inget anslutet kluster ingår i policyns omfattning, eller så har den inga antagningsregler.",
        "could not be read:" => "kunde inte läsas:",
        "objects checked in" => "objekt kontrollerade i",
        "namespaces" => "namnrymder",
        "Would be denied" => "Skulle nekas",
        "Would be warned about (audit mode)" => "Skulle få en varning (granskningsläge)",
        "Denied by the saved version, allowed by this one" => "Nekas av den sparade versionen, tillåts av den här",
        "Resources whose plan it disallows (they keep running)" => "Resurser vars plan den inte tillåter (de fortsätter att köras)",
        "Not saved yet: this policy would newly deny" => "Inte sparad än: den här policyn skulle neka ytterligare",
        "of them newly denied" => "av dem nekas nu för första gången",
        "cluster" => "kluster",
        "and" => "och",
        "more, listed in the preview below." => "till, listade i förhandsvisningen nedan.",
        "Only the first findings are listed here; the counts above include them all. The CLI lists every one:" => "Bara de första fynden listas här; antalen ovan räknar med alla. CLI:t listar vart och ett:",
        "Their running pods stay, but new ones (a rollout, a scale-up, a restart elsewhere) are denied. Review the preview, then save anyway or change the policy." => "Poddar som redan körs finns kvar, men nya (en utrullning, en uppskalning, en omstart på annan plats) nekas. Granska förhandsvisningen och spara ändå eller ändra policyn.",
        "Save anyway" => "Spara ändå",
        "Last audit" => "Senaste granskning",
        "What the policy's rules find among the objects already stored in the boundary's namespaces, after every change and every 10 minutes." => "Vad policyns regler hittar bland de objekt som redan finns i boundaryns namnrymder, efter varje ändring och var tionde minut.",
        "Checked" => "Kontrollerade",
        "Violations" => "Överträdelser",
        "Taken" => "Tagen",
        "not audited yet" => "inte granskad än",
        "(an audit of the new version is under way)" => "(en granskning av den nya versionen pågår)",
        "Rules" => "Regler",
        "SQL Server database" => "SQL Server-databas",
        "Save" => "Spara",
        "Save YAML" => "Spara YAML",
        "Save warnings:" => "Varningar vid sparande:",
        "Saved." => "Sparad.",
        "Scope" => "Omfattning",
        "Sign in" => "Logga in",
        "Sign in with a palisade API token. The portal shows and allows what the token's role allows in the API." => "Logga in med en API-token för palisade. Portalen visar och tillåter det som tokenens roll tillåter i API:t.",
        "Sign out" => "Logga ut",
        "Signed in as" => "Inloggad som",
        "Skip to content" => "Hoppa till innehållet",
        "Something went wrong" => "Något gick fel",
        "Source (git URL)" => "Källa (git-URL)",
        "Static web app" => "Statisk webbapp",
        "Static web apps have no plan." => "Statiska webbappar har ingen plan.",
        "Temporarily unavailable" => "Tillfälligt otillgänglig",
        "The API answered with warnings:" => "API:t svarade med varningar:",
        "The API does not enforce plans of functions: plans that a policy disallows are greyed out here, but the API accepts them (with a warning)." => "API:t kontrollerar inte funktioners planer: planer som en policy inte tillåter är utgråade här, men API:t godtar dem (med en varning).",
        "The form did not come from this page or has expired (CSRF check failed). Nothing was changed." => "Formuläret kom inte från den här sidan eller har gått ut (CSRF-kontrollen misslyckades). Inget ändrades.",
        "The plans cannot be shown now. Please try again in a few seconds." => "Planerna kan inte visas nu. Försök igen om några sekunder.",
        "The policy was not saved:" => "Policyn sparades inte:",
        "The portal saves the spec. Labels and annotations are kept as stored; change them with palisade apply." => "Portalen sparar spec. Etiketter och annoteringar behålls som de är sparade; ändra dem med palisade apply.",
        "The same policy as a document (what palisade apply takes)" => "Samma policy som dokument (det som palisade apply tar emot)",
        "These resources keep a plan that a policy now disallows. They keep running and can be changed in other ways; moving them to another plan is checked." => "De här resurserna behåller en plan som en policy inte längre tillåter. De fortsätter att köras och kan ändras på andra sätt; en flytt till en annan plan kontrolleras.",
        "This stored policy cannot be decoded." => "Den sparade policyn kan inte läsas.",
        "Token" => "Token",
        "Type" => "Typ",
        "Valkey cache" => "Valkey-cache",
        "Value" => "Värde",
        "Value (empty: any value)" => "Värde (tomt: vilket värde som helst)",
        "YAML" => "YAML",
        "admin" => "admin",
        "boundary-admin" => "boundary-admin",
        "deny what the rules disallow" => "avvisa det som reglerna inte tillåter",
        "developer" => "developer",
        "every cluster attached to the boundary" => "varje kluster som är kopplat till boundaryn",
        "not attached to this boundary" => "inte kopplat till den här boundaryn",
        "only warn and record" => "varna och registrera bara",
        "palisade has not reached this cluster yet" => "palisade har inte nått det här klustret än",
        "unknown" => "okänd",
        "— choose a plan —" => "— välj en plan —",
        "Status" => "Status",
        "Function from uploaded code" => "Funktion från uppladdad kod",
        "Static web app from uploaded code" => "Statisk webbapp från uppladdad kod",
        "Create from uploaded code" => "Skapa från uppladdad kod",
        "Only functions and static web apps can be created from uploaded code." => "Bara funktioner och statiska webbappar kan skapas från uppladdad kod.",
        "A policy of this boundary denies builds of uploaded function code, so the function will not be deployed:" => "En policy i den här boundaryn nekar byggen av uppladdad funktionskod, så funktionen kommer inte att driftsättas:",
        "The policies cannot be read now, so this page cannot say whether they deny the build." => "Policyerna kan inte läsas nu, så sidan kan inte säga om de nekar bygget.",
        "Code" => "Kod",
        "Uploaded code" => "Uppladdad kod",
        "The code uploaded before is kept; choose a file only to replace it." => "Koden som laddades upp tidigare behålls; välj en fil bara om den ska ersättas.",
        "An archive (.tar.gz) of a directory, or a single file; at most 8 MiB." => "Ett arkiv (.tar.gz) av en katalog, eller en enda fil; högst 8 MiB.",
        "Replicas (optional)" => "Repliker (valfritt)",
        "The form could not be read whole: the browser stopped sending it. Nothing was changed." => "Formuläret kunde inte läsas helt: webbläsaren slutade skicka det. Inget ändrades.",
        "How many pods run it; 1 when left empty." => "Hur många poddar som kör den; 1 om fältet lämnas tomt.",
        "Request an exception" => "Begär ett undantag",
        "Request the exception" => "Begär undantaget",
        "Save the exception" => "Spara undantaget",
        "Exception name" => "Undantagets namn",
        "Policy" => "Policy",
        "Reason" => "Motivering",
        "Namespaces" => "Namnrymder",
        "Images" => "Avbildningar",
        "Plans" => "Planer",
        "Ends at" => "Upphör",
        "Approve" => "Godkänn",
        "Approving approves exactly this spec:" => "Godkännandet godkänner exakt denna spec:",
        "Nothing was saved." => "Inget sparades.",
        "Your request lets nothing past until an admin or boundary-admin of the boundary approves it." => "Din begäran släpper inte förbi något förrän en admin eller boundary-admin för boundaryn godkänner den.",
        "Saved by you, the exception is active at once." => "Sparat av dig gäller undantaget direkt.",
        "It lets the objects or resources it names past one policy until the time given, and then ends by itself." => "Det släpper förbi de objekt eller resurser det namnger förbi en policy fram till angiven tid och upphör sedan av sig självt.",
        "Rules excepted (none checked: every rule of the policy)" => "Undantagna regler (ingen vald: alla policyns regler)",
        "Objects let past admission rules (every field given must match)" => "Objekt som släpps förbi admission-regler (varje angivet fält måste matcha)",
        "Names of the boundary's namespaces, separated by commas." => "Namn på boundaryns namnrymder, åtskilda med kommatecken.",
        "key=value pairs the object carries, separated by commas." => "nyckel=värde-par som objektet bär, åtskilda med kommatecken.",
        "Exact image names; only these are let past. Empty: every image of a matched object." => "Exakta avbildningsnamn; bara dessa släpps förbi. Tomt: varje avbildning i ett matchat objekt.",
        "Empty: every cluster of the policy's scope." => "Tomt: varje kluster i policyns omfattning.",
        "Resources let past compute plan rules" => "Resurser som släpps förbi regler för beräkningsplaner",
        "type/name, e.g. app/reports, separated by commas." => "typ/namn, t.ex. app/reports, åtskilda med kommatecken.",
        "The plans those resources may use." => "Planerna som de resurserna får använda.",
        "RFC 3339 in UTC, e.g. 2027-01-31T00:00:00Z." => "RFC 3339 i UTC, t.ex. 2027-01-31T00:00:00Z.",
        "Requested exception" => "Begärt undantag",
        "(it lets nothing past until an admin or boundary-admin approves it)" => "(det släpper inte förbi något förrän en admin eller boundary-admin godkänner det)",
        "Saved exception" => "Sparat undantag",
        "(active)" => "(gäller)",
        "Approved exception" => "Godkänt undantag",
        "active until" => "gäller till",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every text a page passes to `t(...)` has a Swedish entry (a tidy-style scan of the
    /// sources, so a new label cannot ship untranslated).
    #[test]
    fn every_label_has_a_swedish_translation() {
        let sources = [
            include_str!("layout.rs"),
            include_str!("pages/mod.rs"),
            include_str!("pages/boundary.rs"),
            include_str!("pages/exceptions.rs"),
            include_str!("pages/manage/mod.rs"),
            include_str!("pages/manage/boundaries.rs"),
            include_str!("pages/manage/clusters.rs"),
            include_str!("pages/manage/placement.rs"),
            include_str!("pages/manage/tokens.rs"),
            include_str!("pages/policy_editor/mod.rs"),
            include_str!("pages/policy_editor/form.rs"),
            include_str!("pages/policy_editor/preview.rs"),
            include_str!("pages/policy_editor/render.rs"),
            include_str!("pages/policy_editor/yaml.rs"),
            include_str!("pages/resource_form/mod.rs"),
            include_str!("pages/resource_form/cluster.rs"),
            include_str!("pages/resource_form/delete.rs"),
            include_str!("pages/resource_form/picker.rs"),
            include_str!("pages/resource_form/render.rs"),
            include_str!("pages/resource_form/typed.rs"),
            include_str!("pages/resource_form/upload.rs"),
            include_str!("pages/sign_in.rs"),
        ];
        let mut missing = Vec::new();
        for source in sources {
            for (index, _) in source.match_indices('"') {
                // Each string literal that is a key of the table or passed to t(...).
                let rest = &source[index + 1..];
                let Some(end) = rest.find('"') else { continue };
                let literal = &rest[..end];
                let before = &source[..index];
                let passed_to_t = before.ends_with(".t(");
                if passed_to_t && swedish(literal).is_none() {
                    missing.push(literal.to_owned());
                }
            }
        }
        assert!(missing.is_empty(), "no Swedish text for {missing:?}");
    }

    #[test]
    fn english_is_the_default_and_unknown_codes_are_refused() {
        assert_eq!(Lang::from_headers(&HeaderMap::new()), Lang::En);
        assert_eq!(Lang::from_code("sv"), Some(Lang::Sv));
        assert_eq!(Lang::from_code("de"), None);
        assert_eq!(Lang::Sv.t("Sign in"), "Logga in");
        assert_eq!(Lang::En.t("Sign in"), "Sign in");
    }
}
