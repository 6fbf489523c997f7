//! A serde `Deserializer` over a parsed [`Value`] that knows where it is.
//!
//! Each nested value is visited with its path (`history[3].event.atMs`);
//! when a visitor fails, the innermost frame stamps the path on the error,
//! so every message names its field without a second parse.

use serde::de::{
    self, DeserializeSeed, EnumAccess, IntoDeserializer, MapAccess, SeqAccess, Unexpected, Visitor,
};

use taskwire_core::js::exact_integer;
use taskwire_core::json::{Error, Path, Value};

/// Deserializes `value`; errors carry the path of the failing field.
pub(crate) struct De<'v, 'de, 'p> {
    pub(crate) value: &'v Value<'de>,
    pub(crate) path: Path<'p>,
}

impl<'v, 'de, 'p> De<'v, 'de, 'p> {
    fn locate(&self, e: Error) -> Error {
        e.stamped(&self.path)
    }
}

/// The error for a value of the wrong kind. Not generic, so each
/// `deserialize_*` below stays a few instructions per visitor type.
#[inline(never)]
fn wrong_kind(value: &Value<'_>, path: &Path<'_>, expected: &dyn de::Expected) -> Error {
    let unexpected = match value {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => Unexpected::Float(*n),
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    };
    <Error as de::Error>::invalid_type(unexpected, expected).stamped(path)
}

impl<'de> de::Deserializer<'de> for De<'_, 'de, '_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Null => self.deserialize_unit(visitor),
            Value::Bool(_) => self.deserialize_bool(visitor),
            Value::Number(_) => self.deserialize_f64(visitor),
            Value::String(_) => self.deserialize_str(visitor),
            Value::Array(_) => self.deserialize_seq(visitor),
            Value::Object(_) => self.deserialize_map(visitor),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Null => visitor.visit_unit().map_err(|e| self.locate(e)),
            other => Err(wrong_kind(other, &self.path, &visitor)),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Bool(b) => visitor.visit_bool(*b).map_err(|e| self.locate(e)),
            other => Err(wrong_kind(other, &self.path, &visitor)),
        }
    }

    /// Every number request lands here: integral numbers in the safe
    /// range go to `visit_u64`/`visit_i64` (so integer fields work), the
    /// rest to `visit_f64`.
    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Number(n) => visit_number(*n, visitor).map_err(|e| self.locate(e)),
            other => Err(wrong_kind(other, &self.path, &visitor)),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let result = match self.value {
            Value::String(alloc::borrow::Cow::Borrowed(s)) => visitor.visit_borrowed_str(s),
            Value::String(s) => visitor.visit_str(s),
            other => return Err(wrong_kind(other, &self.path, &visitor)),
        };
        result.map_err(|e| self.locate(e))
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Array(items) => visitor
                .visit_seq(Seq {
                    items: items.iter(),
                    index: 0,
                    path: self.path,
                })
                .map_err(|e| self.locate(e)),
            other => Err(wrong_kind(other, &self.path, &visitor)),
        }
    }

    /// Structs come from objects only: serde's derive would also accept
    /// an array of field values, which no wire peer means to send.
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Object(entries) => visitor
                .visit_map(Map {
                    entries: entries.iter(),
                    value: None,
                    path: self.path,
                })
                .map_err(|e| self.locate(e)),
            other => Err(wrong_kind(other, &self.path, &"an object")),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_map(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        // Only unit variants spelled as strings are on the wire.
        match self.value {
            Value::String(s) => visitor.visit_enum(Variant(s)).map_err(|e| self.locate(e)),
            other => Err(wrong_kind(other, &self.path, &"a string")),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    serde::forward_to_deserialize_any! {
        i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 bytes byte_buf
    }
}

/// Integral numbers in the safe range go to `visit_u64`/`visit_i64` (so
/// integer fields work), the rest to `visit_f64`.
fn visit_number<'de, V: Visitor<'de>>(n: f64, visitor: V) -> Result<V::Value, Error> {
    // -0 stays a float, so its sign survives as `JSON.parse` keeps it.
    let negative_zero = n == 0.0 && n.is_sign_negative();
    match exact_integer(n) {
        Some(i) if !negative_zero && i >= 0 => visitor.visit_u64(i as u64),
        Some(i) if !negative_zero => visitor.visit_i64(i),
        _ => visitor.visit_f64(n),
    }
}

struct Seq<'v, 'de, 'p> {
    items: core::slice::Iter<'v, Value<'de>>,
    index: usize,
    path: Path<'p>,
}

impl<'de> SeqAccess<'de> for Seq<'_, 'de, '_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        let Some(value) = self.items.next() else {
            return Ok(None);
        };
        let path = Path::Index(&self.path, self.index);
        self.index += 1;
        seed.deserialize(De { value, path })
            .map(Some)
            .map_err(|e| e.stamped(&path))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct Map<'v, 'de, 'p> {
    entries: core::slice::Iter<'v, (alloc::borrow::Cow<'de, str>, Value<'de>)>,
    value: Option<(&'v str, &'v Value<'de>)>,
    path: Path<'p>,
}

impl<'de> MapAccess<'de> for Map<'_, 'de, '_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        self.value = Some((key, value));
        let key_de: de::value::StrDeserializer<'_, Error> = key.as_ref().into_deserializer();
        seed.deserialize(key_de).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let Some((key, value)) = self.value.take() else {
            return Err(de::Error::custom("value requested before its key"));
        };
        let path = Path::Key(&self.path, key);
        seed.deserialize(De { value, path })
            .map_err(|e| e.stamped(&path))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

/// A string read as a unit enum variant.
struct Variant<'v, 'de>(&'v alloc::borrow::Cow<'de, str>);

impl<'de> EnumAccess<'de> for Variant<'_, 'de> {
    type Error = Error;
    type Variant = UnitOnly;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, UnitOnly), Error> {
        let key: de::value::StrDeserializer<'_, Error> = self.0.as_ref().into_deserializer();
        seed.deserialize(key).map(|v| (v, UnitOnly))
    }
}

struct UnitOnly;

impl<'de> de::VariantAccess<'de> for UnitOnly {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, _seed: T) -> Result<T::Value, Error> {
        Err(de::Error::custom("expected a plain string"))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, _visitor: V) -> Result<V::Value, Error> {
        Err(de::Error::custom("expected a plain string"))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Error> {
        Err(de::Error::custom("expected a plain string"))
    }
}
