//! The API's routes on AWS are the routes the API function serves: `template.yaml`'s HTTP API
//! events are generated from `shared/http/src/routes.rs` (each route the function serves, with
//! its scopes on the JWT authorizer), and nothing else in the template routes to the API.

use imgest_http::routes::{self, Op, Served, TEMPLATE_BEGIN, TEMPLATE_END};

#[test]
fn the_templates_api_events_are_the_routes_the_api_function_serves() {
    super::hold_block(TEMPLATE_BEGIN, TEMPLATE_END, &routes::template_events());
}

#[test]
fn no_route_reaches_the_api_but_through_the_generated_events() {
    let template = super::text();
    let (_, block) = super::block(&template, TEMPLATE_BEGIN, TEMPLATE_END).unwrap();
    let outside = template.replace(block, "");
    assert!(
        !outside.contains("Type: HttpApi"),
        "an HttpApi event outside the generated block of template.yaml"
    );
    assert_eq!(
        block.matches("Type: HttpApi").count(),
        routes::served(false).count()
    );
}

/// A route the API function serves that the template lacks is caught (the comparison above
/// fails), and so is a local-only route routed on AWS.
#[test]
fn a_route_missing_from_the_template_is_caught() {
    let events = routes::template_events();
    let without_known = events.replace("        KnownImages:\n", "        Unknown:\n");
    let shown = super::difference(&without_known, &events);
    assert!(shown.contains("KnownImages"), "{shown}");
    for op in Op::ALL {
        let routed = events.contains(&format!("        {}:\n", op.event_name()));
        assert_eq!(routed, op.route().served == Served::Everywhere, "{op:?}");
    }
}
