//! A [`Model`]'s JSON as the reference prints it (`get_available_models`, `get_state`,
//! `set_model`, ...): its model objects are plain JavaScript objects, so the optional keys
//! (`headers`, `compat`, `thinkingLevelMap`) sit where they were created. Built-in models carry
//! them where `models.generated.ts` wrote them (headers and compat after `baseUrl`, the thinking
//! map after `reasoning`); models.json models put the thinking map after `reasoning` and compat
//! last; overrides append a key the model did not have. [`ModelShape`] records which. pi 0.87.1's
//! catalog has no fixed order at all: its built-in models carry their own ([`ModelShape::ordered`]).

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

use crate::llm::Model;
use crate::llm::models::ThinkingLevelMap;

/// Where an optional key is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    /// After `baseUrl`.
    AfterBaseUrl,
    /// After `reasoning`.
    AfterReasoning,
    /// After `maxTokens`, in rank order (the order the keys were added).
    End(u8),
    /// Where the model's own key order puts it ([`ModelShape::ordered`]).
    InOrder,
}

/// Never added: written last if it ever has a value.
const ABSENT: Slot = Slot::End(u8::MAX);

/// The optional keys of a model's JSON, in [`Slot`] order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    Headers = 0,
    Compat = 1,
    ThinkingLevelMap = 2,
}

/// The model's `thinkingLevelMap` and the position of its optional keys.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelShape {
    pub thinking_level_map: Option<ThinkingLevelMap>,
    slots: [Slot; 3],
    /// Every key in the model's order, one letter each (`i`d, `n`ame, `a`pi, `p`rovider,
    /// base`u`rl, `r`easoning, `t`hinkingLevelMap, `I`nput, `$` cost, context`w`indow,
    /// `m`axTokens, `c`ompat, `h`eaders, `P`romptCache, input`L`imits).
    order: Option<&'static str>,
}

impl Default for ModelShape {
    /// `headers` then `compat` at the end, no thinking map.
    fn default() -> Self {
        ModelShape {
            thinking_level_map: None,
            slots: [Slot::End(0), Slot::End(1), ABSENT],
            order: None,
        }
    }
}

impl ModelShape {
    /// A built-in model: the keys it has where the generated table has them.
    pub fn builtin(headers: bool, compat: bool, thinking: Option<ThinkingLevelMap>) -> ModelShape {
        ModelShape {
            slots: [
                if headers { Slot::AfterBaseUrl } else { ABSENT },
                if compat { Slot::AfterBaseUrl } else { ABSENT },
                if thinking.is_some() {
                    Slot::AfterReasoning
                } else {
                    ABSENT
                },
            ],
            thinking_level_map: thinking,
            order: None,
        }
    }

    /// A pi 0.87.1 built-in model: every key where `order` has it.
    pub fn ordered(order: &'static str, thinking: Option<ThinkingLevelMap>) -> ModelShape {
        let slot = |letter: char| {
            if order.contains(letter) {
                Slot::InOrder
            } else {
                ABSENT
            }
        };
        ModelShape {
            thinking_level_map: thinking,
            slots: [slot('h'), slot('c'), slot('t')],
            order: Some(order),
        }
    }

    /// A models.json model (`headers` is always undefined there).
    pub fn custom(thinking: Option<ThinkingLevelMap>) -> ModelShape {
        ModelShape {
            thinking_level_map: thinking,
            slots: [Slot::End(0), Slot::End(1), Slot::AfterReasoning],
            order: None,
        }
    }

    /// A key assigned (by an override): appended unless the model already had it.
    pub fn assigned(&mut self, key: Key) {
        if self.slots[key as usize] == ABSENT {
            let next = self
                .slots
                .iter()
                .filter_map(|s| match s {
                    Slot::End(r) if *r != u8::MAX => Some(r + 1),
                    _ => None,
                })
                .max()
                .unwrap_or(0);
            self.slots[key as usize] = Slot::End(next);
        }
    }
}

impl Serialize for Model {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let shape = &self.shape;
        let mut map = serializer.serialize_map(None)?;
        let optional = |map: &mut S::SerializeMap, key: Key| -> Result<(), S::Error> {
            match key {
                Key::Headers => match &self.headers {
                    Some(h) => map.serialize_entry("headers", h),
                    None => Ok(()),
                },
                Key::Compat => match &self.compat {
                    Some(c) => map.serialize_entry("compat", c),
                    None => Ok(()),
                },
                Key::ThinkingLevelMap => match &shape.thinking_level_map {
                    Some(t) => map.serialize_entry("thinkingLevelMap", &t.to_json()),
                    None => Ok(()),
                },
            }
        };
        let keys = [Key::Headers, Key::Compat, Key::ThinkingLevelMap];
        let in_slot = |slot: Slot| {
            keys.into_iter()
                .filter(move |k| shape.slots[*k as usize] == slot)
        };
        if let Some(order) = shape.order {
            let raw = |text: Option<&str>| text.and_then(|t| serde_json::from_str::<Value>(t).ok());
            for letter in order.chars() {
                match letter {
                    'i' => map.serialize_entry("id", &self.id)?,
                    'n' => map.serialize_entry("name", &self.name)?,
                    'a' => map.serialize_entry("api", &self.api)?,
                    'p' => map.serialize_entry("provider", &self.provider)?,
                    'u' => map.serialize_entry("baseUrl", &self.base_url)?,
                    'r' => map.serialize_entry("reasoning", &self.reasoning)?,
                    'I' => map.serialize_entry("input", &self.input)?,
                    '$' => map.serialize_entry("cost", &self.cost)?,
                    'w' => map.serialize_entry("contextWindow", &self.context_window)?,
                    'm' => map.serialize_entry("maxTokens", &self.max_tokens)?,
                    'h' => optional(&mut map, Key::Headers)?,
                    'c' => optional(&mut map, Key::Compat)?,
                    't' => optional(&mut map, Key::ThinkingLevelMap)?,
                    'P' => {
                        if let Some(v) = raw(self.prompt_cache) {
                            map.serialize_entry("promptCache", &v)?;
                        }
                    }
                    // pi 1.6.0's catalog: every model is a chat model.
                    'y' => map.serialize_entry("type", "chat")?,
                    'L' => {
                        if let Some(v) = raw(self.input_limits) {
                            map.serialize_entry("inputLimits", &v)?;
                        }
                    }
                    _ => {}
                }
            }
        } else {
            map.serialize_entry("id", &self.id)?;
            map.serialize_entry("name", &self.name)?;
            map.serialize_entry("api", &self.api)?;
            map.serialize_entry("provider", &self.provider)?;
            map.serialize_entry("baseUrl", &self.base_url)?;
            for k in in_slot(Slot::AfterBaseUrl) {
                optional(&mut map, k)?;
            }
            map.serialize_entry("reasoning", &self.reasoning)?;
            for k in in_slot(Slot::AfterReasoning) {
                optional(&mut map, k)?;
            }
            map.serialize_entry("input", &self.input)?;
            map.serialize_entry("cost", &self.cost)?;
            map.serialize_entry("contextWindow", &self.context_window)?;
            map.serialize_entry("maxTokens", &self.max_tokens)?;
        }
        let mut last: Vec<(u8, Key)> = keys
            .into_iter()
            .filter_map(|k| match shape.slots[k as usize] {
                Slot::End(r) => Some((r, k)),
                _ => None,
            })
            .collect();
        crate::sort::sort_by_key(&mut last, |(r, _)| *r);
        for (_, k) in last {
            optional(&mut map, k)?;
        }
        map.end()
    }
}
