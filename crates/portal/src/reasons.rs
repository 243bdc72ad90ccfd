//! palisade's reasons after a status's words in the page's language. A reason palisade words
//! itself (`palisade_policy::reason`) is said in Swedish on Swedish pages; what a reason quotes
//! (an error, the API server's answer) and any reason palisade does not word itself (a
//! Kubernetes message) stay as written, marked `lang="en"`.

use maud::{html, Markup};
use palisade_policy::reason::{
    parse_no_placement, parse_too_old, ADMITTED_VIOLATING, DENIED_EXCEPTED, NOT_SERVED, NOT_WARNED,
    PROBE_REFUSED, UNCONFIRMED, WARNED_EXCEPTED,
};

use crate::i18n::Lang;
use crate::layout::Ctx;

/// The reason as the page says it.
pub fn reason(ctx: &Ctx, text: &str) -> Markup {
    match (ctx.lang, swedish(text)) {
        (Lang::Sv, Some(Said { own, quoted: None })) => html! { (own) },
        (
            Lang::Sv,
            Some(Said {
                own,
                quoted: Some(rest),
            }),
        ) => {
            html! { (own) ": " span lang="en" { (rest) } }
        }
        _ => html! { span lang="en" { (text) } },
    }
}

/// A reason in Swedish: palisade's words, and what they quote.
#[derive(Debug, PartialEq, Eq)]
struct Said<'a> {
    own: String,
    quoted: Option<&'a str>,
}

fn swedish(text: &str) -> Option<Said<'_>> {
    let fixed = [
        (
            NOT_SERVED,
            "API-servern tillhandahåller inte admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy",
        ),
        (ADMITTED_VIOLATING, "API-servern släppte in ett objekt som bryter mot policyn"),
        (
            NOT_WARNED,
            "API-servern släppte in ett objekt som bryter mot policyn utan en varning",
        ),
        (DENIED_EXCEPTED, "API-servern nekade ett objekt som undantaget matchar"),
        (WARNED_EXCEPTED, "API-servern varnade för ett objekt som undantaget matchar"),
    ];
    if let Some((_, sv)) = fixed.iter().find(|(en, _)| *en == text) {
        return Some(Said {
            own: (*sv).to_owned(),
            quoted: None,
        });
    }
    let started = [
        (
            PROBE_REFUSED,
            "API-servern nekade kontrollen av ett annat skäl",
        ),
        (UNCONFIRMED, "palisade kan inte bekräfta det"),
    ];
    for (en, sv) in started {
        if let Some(rest) = text.strip_prefix(en) {
            let rest = rest.strip_prefix(": ").unwrap_or(rest);
            return Some(Said {
                own: sv.to_owned(),
                quoted: (!rest.is_empty()).then_some(rest),
            });
        }
    }
    if let Some((version, oldest)) = parse_too_old(text) {
        return Some(Said {
            own: format!("Kubernetes {version} är äldre än {oldest}"),
            quoted: None,
        });
    }
    if let Some(boundary) = parse_no_placement(text) {
        return Some(Said {
            own: format!(
                "inget kluster angivet, och boundaryn '{boundary}' har inte ett enda anslutet kluster och namnområde att köra den i"
            ),
            quoted: None,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use palisade_policy::reason::{no_placement, too_old};

    fn ctx(lang: Lang) -> Ctx {
        Ctx::in_lang(lang)
    }

    #[test]
    fn palisade_s_reasons_are_swedish_and_what_they_quote_stays() {
        let sv = ctx(Lang::Sv);
        let cases = [
            (NOT_SERVED.to_owned(), "API-servern tillhandahåller inte admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy".to_owned()),
            (ADMITTED_VIOLATING.to_owned(), "API-servern släppte in ett objekt som bryter mot policyn".to_owned()),
            (NOT_WARNED.to_owned(), "API-servern släppte in ett objekt som bryter mot policyn utan en varning".to_owned()),
            (DENIED_EXCEPTED.to_owned(), "API-servern nekade ett objekt som undantaget matchar".to_owned()),
            (WARNED_EXCEPTED.to_owned(), "API-servern varnade för ett objekt som undantaget matchar".to_owned()),
            (
                format!("{PROBE_REFUSED}: denied by policy old"),
                r#"API-servern nekade kontrollen av ett annat skäl: <span lang="en">denied by policy old</span>"#.to_owned(),
            ),
            (
                format!("{UNCONFIRMED}: cannot reach the API server"),
                r#"palisade kan inte bekräfta det: <span lang="en">cannot reach the API server</span>"#.to_owned(),
            ),
            (too_old("1.29", "1.30"), "Kubernetes 1.29 är äldre än 1.30".to_owned()),
            (
                no_placement("shop"),
                "inget kluster angivet, och boundaryn 'shop' har inte ett enda anslutet kluster och namnområde att köra den i".to_owned(),
            ),
            (
                "the Deployment was refused: quota".to_owned(),
                r#"<span lang="en">the Deployment was refused: quota</span>"#.to_owned(),
            ),
        ];
        for (english, swedish) in cases {
            assert_eq!(reason(&sv, &english).into_string(), swedish, "{english}");
            assert_eq!(
                reason(&ctx(Lang::En), &english).into_string(),
                html! { span lang="en" { (english) } }.into_string()
            );
        }
    }
}
