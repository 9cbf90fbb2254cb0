//! The operations of small descriptions in each dialect, selected and made tools.

use super::*;

fn doc() -> Value {
    super::super::doc::parse(
        r##"
openapi: 3.0.3
info: { title: Pets, version: "1" }
servers: [{ url: /v1 }]
paths:
  /pets/{petId}:
    parameters:
      - { name: petId, in: path, required: true, schema: { type: integer } }
    get:
      operationId: showPetById
      summary: Info for a pet
      tags: [pets]
      parameters:
        - { name: Authorization, in: header, schema: { type: string } }
        - { name: X-Trace, in: header, schema: { type: string } }
      responses:
        200:
          description: ok
          content: { application/json: { schema: { $ref: "#/components/schemas/Pet" } } }
    delete:
      tags: [pets]
      responses: { 204: { description: gone } }
  /pets:
    get:
      tags: [pets]
      parameters:
        - { name: tags, in: query, style: form, explode: false, schema: { type: array, items: { type: string } } }
      responses:
        200:
          description: ok
          content: { application/json: { schema: { type: array, items: { $ref: "#/components/schemas/Pet" } } } }
    post:
      operationId: createPet
      requestBody:
        required: true
        content: { application/json: { schema: { $ref: "#/components/schemas/Pet" } } }
      responses: { 201: { description: created } }
  /files/{name}:
    put:
      tags: [admin]
      requestBody: { content: { multipart/form-data: { schema: { type: object } } } }
      responses: { 200: { description: ok } }
components:
  schemas:
    Pet: { type: object, required: [id], properties: { id: { type: integer }, tag: { type: string, nullable: true } } }
"##,
    )
    .unwrap()
}

#[test]
fn selected_operations_become_tools_and_the_rest_say_why() {
    let api = build(&doc(), &Selection::default()).unwrap();
    let names: Vec<&str> = api.operations.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["get_pets", "showPetById"]);
    assert_eq!(api.server.as_deref(), Some("/v1"));
    let show = &api.operations[1];
    let input = &show.tool["inputSchema"];
    assert_eq!(input["required"], json!(["petId"]));
    assert!(input["properties"].get("Authorization").is_none(), "a model never sets Authorization: {input}");
    assert!(input["properties"].get("X-Trace").is_some());
    assert_eq!(show.tool["outputSchema"]["properties"]["tag"]["type"], json!(["string", "null"]));
    assert_eq!(show.tool["annotations"]["readOnlyHint"], true);
    assert_eq!(show.tool["title"], "Info for a pet");
    let list = &api.operations[0];
    assert!(list.wrapped, "an array answer is wrapped");
    assert!(object_like(&json!({ "allOf": [{ "$ref": "x" }, { "properties": { "data": {} } }] })));
    assert!(!object_like(&json!({ "oneOf": [{ "type": "object" }, { "type": "string" }] })));
    assert_eq!(list.tool["outputSchema"]["required"], json!(["result"]));
    assert_eq!((list.params[0].style, list.params[0].explode), (Style::Form, false));
    let reasons: Vec<String> = api.skipped.iter().map(|s| format!("{}: {}", s.operation, s.reason)).collect();
    assert!(reasons.iter().any(|r| r.starts_with("DELETE /pets/{petId}: method DELETE is not selected")), "{reasons:?}");
    assert_eq!(reasons.len(), 3, "{reasons:?}");
}

#[test]
fn methods_tags_paths_and_names_select() {
    let sel = Selection {
        methods: vec!["GET".into(), "POST".into(), "DELETE".into(), "PUT".into()],
        exclude_tags: vec!["admin".into()],
        ..Selection::default()
    };
    let api = build(&doc(), &sel).unwrap();
    let names: Vec<&str> = api.operations.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["get_pets", "createPet", "showPetById", "delete_pets_petId"]);
    let create = &api.operations[1];
    assert_eq!(create.body.as_ref().map(|b| b.key.as_str()), Some("body"));
    assert_eq!(create.tool["inputSchema"]["required"], json!(["body"]));
    let delete = &api.operations[3];
    assert_eq!(
        delete.tool["annotations"],
        json!({ "readOnlyHint": false, "openWorldHint": true, "destructiveHint": true, "idempotentHint": true })
    );
    assert!(api.skipped.iter().any(|s| s.reason.contains("exclude_tags")));
    let sel = Selection { methods: vec!["PUT".into()], ..Selection::default() };
    let api = build(&doc(), &sel).unwrap();
    assert!(api.skipped.iter().any(|s| s.operation == "PUT /files/{name}" && s.reason.contains("multipart")), "{:?}", api.skipped);
    let sel = Selection { include: vec!["show*".into()], include_paths: vec!["/pets/*".into()], ..Selection::default() };
    assert_eq!(build(&doc(), &sel).unwrap().operations.len(), 1);
}

#[test]
fn swagger2_parameters_and_undeclared_path_variables() {
    let doc = json!({
        "swagger": "2.0", "host": "httpbin.org", "basePath": "/", "schemes": ["https"],
        "paths": {
            "/anything/{anything}": { "get": { "responses": { "200": { "description": "ok" } } } },
            "/status/{codes}": { "get": { "parameters": [{ "name": "codes", "in": "path", "type": "string" }], "responses": {} } },
            "/q": { "get": { "parameters": [{ "name": "ids", "in": "query", "type": "array", "items": { "type": "integer" }, "collectionFormat": "multi" }], "responses": {} } }
        }
    });
    let api = build(&doc, &Selection::default()).unwrap();
    let by = |n: &str| api.operations.iter().find(|o| o.name == n).unwrap_or_else(|| panic!("{n}: {:?}", api.operations));
    assert_eq!(by("get_anything_anything").tool["inputSchema"]["required"], json!(["anything"]));
    assert_eq!(by("get_status_codes").tool["inputSchema"]["properties"]["codes"]["type"], "string");
    let q = by("get_q");
    assert_eq!((q.params[0].style, q.params[0].explode), (Style::Form, true));
    assert_eq!(q.tool["inputSchema"]["properties"]["ids"]["items"]["type"], "integer");
}

/// docs/openapi.md, "Operations to tools": a response schema that does not say "object" (here
/// `{}`, which says nothing) wraps every JSON answer of the operation, an object too, as
/// `{"result": …}`; without a JSON 2xx schema, only an answer that is not an object is wrapped.
#[test]
fn a_schema_that_does_not_say_object_wraps_every_answer() {
    let doc = super::super::doc::parse(
        r##"
openapi: 3.0.3
info: { title: Any, version: "1" }
paths:
  /any:
    get:
      operationId: anything
      responses: { "200": { description: ok, content: { application/json: { schema: {} } } } }
  /free:
    get:
      operationId: free
      responses: { "200": { description: ok } }
"##,
    )
    .unwrap();
    let api = build(&doc, &Selection::default()).unwrap();
    let answer = |body: &'static [u8]| crate::openapi::Answer {
        status: 200,
        content_type: Some("application/json"),
        body,
        truncated: false,
        url: "http://api/x",
    };
    let any = &api.operations[0];
    assert!(any.wrapped);
    assert_eq!(any.tool["outputSchema"], json!({ "type": "object", "properties": { "result": {} }, "required": ["result"] }));
    assert_eq!(crate::openapi::tool_result(any, &answer(br#"{"a":1}"#))["structuredContent"], json!({ "result": { "a": 1 } }));
    let free = &api.operations[1];
    assert!(!free.wrapped && free.tool.get("outputSchema").is_none(), "{}", free.tool);
    assert_eq!(crate::openapi::tool_result(free, &answer(br#"{"a":1}"#))["structuredContent"], json!({ "a": 1 }));
    assert_eq!(crate::openapi::tool_result(free, &answer(b"[1]"))["structuredContent"], json!({ "result": [1] }));
}
