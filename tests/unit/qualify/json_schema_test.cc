// qualify/json_schema.h: the schema subset (type, properties, required, items, enum), the
// violation path and message, and schema shape problems.
#include "qualify/json_schema.h"

#include <gtest/gtest.h>

namespace bakeoff::qualify {
namespace {

using nlohmann::json;

const json kPet = json::parse(R"({
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "age": {"type": "integer"},
    "kind": {"enum": ["cat", "dog"]},
    "toys": {"type": "array", "items": {"type": "string"}},
    "owner": {"type": ["string", "null"]}
  },
  "required": ["name", "age"]
})");

TEST(JsonSchemaTest, ConformingValuePasses) {
  EXPECT_EQ(SchemaViolation(json::parse(R"({"name": "Rex", "age": 3, "kind": "dog",
                                            "toys": ["ball"], "owner": null})"),
                            kPet),
            std::nullopt);
  // Properties not in the schema are allowed (no additionalProperties in the subset).
  EXPECT_EQ(SchemaViolation(json::parse(R"({"name": "Rex", "age": 3, "extra": 1})"), kPet),
            std::nullopt);
}

TEST(JsonSchemaTest, WrongTopLevelType) {
  EXPECT_EQ(SchemaViolation(json::array(), kPet), "$: expected object, got array");
  EXPECT_EQ(SchemaViolation(json("text"), kPet), "$: expected object, got string");
}

TEST(JsonSchemaTest, MissingRequiredProperty) {
  EXPECT_EQ(SchemaViolation(json::parse(R"({"name": "Rex"})"), kPet),
            "$: required property \"age\" is missing");
}

TEST(JsonSchemaTest, IntegerAcceptsWholeFloatsOnly) {
  EXPECT_EQ(SchemaViolation(json::parse(R"({"name": "Rex", "age": 3.0})"), kPet), std::nullopt);
  EXPECT_EQ(SchemaViolation(json::parse(R"({"name": "Rex", "age": 3.5})"), kPet),
            "$.age: expected integer, got number");
  EXPECT_EQ(SchemaViolation(json::parse(R"({"name": "Rex", "age": "3"})"), kPet),
            "$.age: expected integer, got string");
}

TEST(JsonSchemaTest, NumberAcceptsIntegers) {
  EXPECT_EQ(SchemaViolation(json(4), json::parse(R"({"type": "number"})")), std::nullopt);
}

TEST(JsonSchemaTest, EnumOutsideItsValues) {
  const auto why =
      SchemaViolation(json::parse(R"({"name": "Rex", "age": 3, "kind": "cow"})"), kPet);
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why, R"($.kind: "cow" is not one of ["cat","dog"])");
}

TEST(JsonSchemaTest, ItemsCheckedWithTheirIndex) {
  EXPECT_EQ(SchemaViolation(json::parse(R"({"name": "Rex", "age": 3, "toys": ["a", 2]})"), kPet),
            "$.toys[1]: expected string, got integer");
}

TEST(JsonSchemaTest, TypeListAcceptsAnyOfItsTypes) {
  EXPECT_EQ(SchemaViolation(json::parse(R"({"name": "R", "age": 1, "owner": 7})"), kPet),
            "$.owner: expected string or null, got integer");
}

TEST(JsonSchemaTest, BooleanSchemas) {
  EXPECT_EQ(SchemaViolation(json(1), json(true)), std::nullopt);
  EXPECT_TRUE(SchemaViolation(json(1), json(false)).has_value());
  EXPECT_EQ(SchemaViolation(json(1), json::object()), std::nullopt);
}

TEST(JsonSchemaTest, BooleanIsNotAnInteger) {
  EXPECT_EQ(SchemaViolation(json(true), json::parse(R"({"type": "integer"})")),
            "$: expected integer, got boolean");
}

TEST(JsonSchemaTest, SchemaProblemsNameTheKeyword) {
  EXPECT_EQ(SchemaProblem(kPet), std::nullopt);
  EXPECT_NE(SchemaProblem(json::parse(R"({"type": "text"})"))->find("schema.type"),
            std::string::npos);
  EXPECT_NE(SchemaProblem(json::parse(R"({"required": "name"})"))->find("schema.required"),
            std::string::npos);
  EXPECT_NE(SchemaProblem(json::parse(R"({"enum": "a"})"))->find("schema.enum"), std::string::npos);
  EXPECT_NE(SchemaProblem(json::parse(R"({"properties": {"a": {"type": 3}}})"))
                ->find("schema.properties.a.type"),
            std::string::npos);
  EXPECT_NE(SchemaProblem(json::parse(R"({"items": []})"))->find("schema.items"),
            std::string::npos);
  EXPECT_TRUE(SchemaProblem(json("object")).has_value());
}

}  // namespace
}  // namespace bakeoff::qualify
