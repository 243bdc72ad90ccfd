//! palisade's warnings in the page's language. The API sends them in English (the `Display` of
//! `palisade_policy::Warning`); the portal says the same from their parts, and leaves what
//! they quote (a denial's message, names, plans, times) as written.

use palisade_policy::{ExceptionWarning, PlatformObject, SaveWarning, Warning};

use crate::i18n::Lang;
use crate::layout::Ctx;

/// The warning as the page says it.
pub fn text(ctx: &Ctx, warning: &Warning) -> String {
    match ctx.lang {
        Lang::En => warning.to_string(),
        Lang::Sv => swedish(warning),
    }
}

/// A policy's save warning as the page says it.
pub fn save_text(ctx: &Ctx, warning: &SaveWarning) -> String {
    match ctx.lang {
        Lang::En => warning.to_string(),
        Lang::Sv => match warning {
            SaveWarning::EmptyLabelValue(key) => {
                format!("etiketten '{key}' med värdet \"\" sparades som valfritt värde")
            }
            SaveWarning::RegistryTrimmed { given, saved } => {
                format!("registerprefixet '{given}' sparades som '{saved}'")
            }
            SaveWarning::UnknownPlanEntry(entry) => format!(
                "planposten '{entry}' namnger ingen plan av någon typ som den gäller för"
            ),
            SaveWarning::BlockedType(ty) => format!(
                "att skapa resurser av typen {ty} nekas nu: ingen policy tillåter någon plan för {ty}"
            ),
            SaveWarning::RepositoryPrefix(prefix) => format!(
                "registerprefixet '{prefix}' namnger ett repository: dess taggade avbilder \
                 ({prefix}:tagg) ligger inte under det"
            ),
            SaveWarning::PlansAtOnce => {
                "allowedComputePlans gäller genast: utrullningen stegar bara antagningsreglerna"
                    .to_owned()
            }
        },
    }
}

/// An exception's save warning as the page says it.
pub fn exception_text(ctx: &Ctx, warning: &ExceptionWarning) -> String {
    match ctx.lang {
        Lang::En => warning.to_string(),
        Lang::Sv => match warning {
            ExceptionWarning::NoSuchPolicy { boundary, policy } => format!(
                "boundaryn '{boundary}' har ingen policy '{policy}' (ännu): undantaget gäller när den får en"
            ),
            ExceptionWarning::Expired { name, expires_at } => {
                format!("undantaget '{name}' upphörde {expires_at}")
            }
            ExceptionWarning::MatchesByLabelsOnly { name } => format!(
                "undantaget '{name}' matchar objekt enbart på etiketter, som den som skapar ett objekt sätter: \
                 alla som får skapa objekt i boundaryns namnrymder kan släppas förbi; ange namnrymder eller avbilder i match för att begränsa det"
            ),
        },
    }
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn swedish(warning: &Warning) -> String {
    match warning {
        Warning::AuditWouldDeny { policy, message } => {
            format!("Policyn '{policy}' (audit) skulle neka: {message}")
        }
        Warning::PlanAllowedByException {
            plan,
            exception,
            until,
        } => format!(
            "Beräkningsplanen '{plan}' tillåts av undantaget '{exception}' till {}",
            until.replace(".000Z", "Z")
        ),
        Warning::FunctionPlanNotEnforced { plan, policies } => {
            let noun = if policies.len() == 1 {
                "boundary-policyn"
            } else {
                "boundary-policyerna"
            };
            format!(
                "Beräkningsplanen '{plan}' är otillåten enligt {noun} {}; funktioners planer upprätthålls inte",
                quoted(policies)
            )
        }
        Warning::FunctionPlanUnchecked => {
            "Boundaryns policyer kunde inte läsas; planen jämfördes inte med dem".to_owned()
        }
        Warning::LatestBuilderDenied { policy } => format!(
            "Policyn '{policy}' (DisallowLatestTag) nekar byggen av uppladdad kod: \
             funktionsbyggaren refereras med taggen latest"
        ),
        Warning::PlatformImageDenied {
            object,
            resource,
            denial,
        } => {
            let object = match object {
                PlatformObject::BuildJob => "Bygg-Jobbet",
                PlatformObject::Deployment => "Deploymenten",
            };
            format!("{object} som palisade kör för {resource} kommer att nekas: {denial}")
        }
        Warning::UploadsNotBuilt => "uppladdad kod byggs inte: palisade serve har ingen \
             --public-url som bygg-Jobs kan hämta den från"
            .to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(lang: Lang) -> Ctx {
        Ctx::in_lang(lang)
    }

    #[test]
    fn a_warning_is_english_as_the_api_sends_it_and_swedish_in_its_own_words() {
        let warning = Warning::FunctionPlanNotEnforced {
            plan: "large".into(),
            policies: vec!["size-limits".into()],
        };
        assert_eq!(text(&ctx(Lang::En), &warning), warning.to_string());
        assert_eq!(
            text(&ctx(Lang::Sv), &warning),
            "Beräkningsplanen 'large' är otillåten enligt boundary-policyn 'size-limits'; funktioners planer upprätthålls inte"
        );
        let denial = "Policy 'trusted' (AllowedRegistries) denied image x: it is not under y.";
        let platform = Warning::PlatformImageDenied {
            object: PlatformObject::BuildJob,
            resource: "app/api".into(),
            denial: denial.into(),
        };
        assert_eq!(
            text(&ctx(Lang::Sv), &platform),
            format!("Bygg-Jobbet som palisade kör för app/api kommer att nekas: {denial}")
        );
    }
}
