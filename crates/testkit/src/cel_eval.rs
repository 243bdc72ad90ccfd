//! Runs a policy's rendered CEL on the `cel` crate the way the API server runs a
//! ValidatingAdmissionPolicy: match conditions, then variables, then the validation and, when
//! it fails, the message expression, post-processed as Kubernetes does.

use std::collections::HashMap;
use std::sync::Arc;

use cel::objects::{Key, Map, Value};
use cel::{Context, Program};
use palisade_vap::{PolicyCel, MATCH_CONDITIONS};

/// What one policy's CEL decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CelOutcome {
    /// A match condition was false: the policy does not apply.
    NotMatched,
    Admitted,
    Denied(String),
}

/// Why CEL could not be evaluated (compile or runtime error). Kubernetes rejects the object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{stage}: {message}")]
pub struct CelError {
    pub stage: String,
    pub message: String,
}

fn err(stage: &str, message: impl ToString) -> CelError {
    CelError {
        stage: stage.to_owned(),
        message: message.to_string(),
    }
}

/// A compiled policy: programs parsed once, evaluated many times.
pub struct CompiledPolicy {
    match_conditions: Vec<Program>,
    variables: Vec<(String, Program)>,
    expression: Program,
    message_expression: Program,
    message: String,
}

impl std::fmt::Debug for CompiledPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledPolicy")
            .field("message", &self.message)
            .finish_non_exhaustive()
    }
}

fn compile(stage: &str, source: &str) -> Result<Program, CelError> {
    Program::compile(source).map_err(|e| err(stage, e))
}

impl CompiledPolicy {
    pub fn new(cel: &PolicyCel) -> Result<Self, CelError> {
        Ok(CompiledPolicy {
            match_conditions: MATCH_CONDITIONS
                .iter()
                .map(|(name, expr)| compile(name, expr))
                .collect::<Result<_, _>>()?,
            variables: cel
                .variables
                .iter()
                .map(|(name, expr)| Ok((name.clone(), compile(name, expr)?)))
                .collect::<Result<_, CelError>>()?,
            expression: compile("expression", &cel.expression)?,
            message_expression: compile("messageExpression", &cel.message_expression)?,
            message: cel.message.clone(),
        })
    }

    /// Evaluates with `object` and `request` bound (as converted CEL values).
    pub fn evaluate(&self, object: &Value, request: &Value) -> Result<CelOutcome, CelError> {
        let mut context = Context::default();
        context.add_variable_from_value("object", object.clone());
        context.add_variable_from_value("request", request.clone());
        for (index, condition) in self.match_conditions.iter().enumerate() {
            match condition.execute(&context) {
                Ok(Value::Bool(true)) => {}
                Ok(Value::Bool(false)) => return Ok(CelOutcome::NotMatched),
                Ok(other) => {
                    return Err(err(
                        MATCH_CONDITIONS[index].0,
                        format!("not a bool: {other:?}"),
                    ))
                }
                Err(e) => return Err(err(MATCH_CONDITIONS[index].0, e)),
            }
        }
        let mut variables: HashMap<Key, Value> = HashMap::new();
        for (name, program) in &self.variables {
            let mut scope = Context::default();
            scope.add_variable_from_value("object", object.clone());
            scope.add_variable_from_value("request", request.clone());
            scope.add_variable_from_value(
                "variables",
                Value::Map(Map {
                    map: Arc::new(variables.clone()),
                }),
            );
            let value = program.execute(&scope).map_err(|e| err(name, e))?;
            variables.insert(Key::String(Arc::new(name.clone())), value);
        }
        context.add_variable_from_value(
            "variables",
            Value::Map(Map {
                map: Arc::new(variables),
            }),
        );
        match self.expression.execute(&context) {
            Ok(Value::Bool(true)) => Ok(CelOutcome::Admitted),
            Ok(Value::Bool(false)) => {
                let message = match self.message_expression.execute(&context) {
                    Ok(Value::String(text)) => {
                        kubernetes_message(&text).unwrap_or_else(|| self.message.clone())
                    }
                    _ => self.message.clone(),
                };
                Ok(CelOutcome::Denied(message))
            }
            Ok(other) => Err(err("expression", format!("not a bool: {other:?}"))),
            Err(e) => Err(err("expression", e)),
        }
    }
}

/// Kubernetes' handling of a message expression's result: trimmed; empty, over 5,120 bytes or
/// with a line feed means "use the static message" (`None`).
pub fn kubernetes_message(text: &str) -> Option<String> {
    let trimmed = text.trim();
    if trimmed.is_empty() || trimmed.len() > 5120 || trimmed.contains('\n') {
        None
    } else {
        Some(trimmed.to_owned())
    }
}

/// Converts a JSON object into a CEL value.
pub fn to_cel(json: &serde_json::Value) -> Result<Value, CelError> {
    cel::to_value(json).map_err(|e| err("object", e))
}

/// The admission request of a CREATE (or UPDATE) of `object` by `username`.
pub fn request_for(
    object: &serde_json::Value,
    operation: &str,
    username: &str,
) -> serde_json::Value {
    let kind = object.get("kind").cloned().unwrap_or_default();
    let api_version = object
        .get("apiVersion")
        .and_then(|v| v.as_str())
        .unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    serde_json::json!({
        "operation": operation,
        "kind": {"group": group, "version": version, "kind": kind},
        "userInfo": {"username": username},
    })
}
