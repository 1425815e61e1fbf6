//! The watermark as the template deploys it: every function that makes variants gets the same
//! watermark settings and may read `config/` (a function left out would make unmarked variants,
//! of another variant-set version, which a backfill would then redo), and no other function
//! gets either.

use super::permissions::{PERMISSIONS, Res};

/// The functions that run the pipeline: the api (uploads sent inline), the fetch functions
/// (new photos that fit their memory), the process function and the backfill.
const MAKE_VARIANTS: &[&str] = &[
    "ApiFunction",
    "FetchFunction0",
    "FetchFunction1",
    "FetchFunction2",
    "ProcessFunction",
    "BackfillFunction",
];

const SETTINGS: &[&str] = &[
    "IMGEST_WATERMARK: !If [HasWatermark, !Sub \"s3://${FilesBucket}/${WatermarkKey}\", \"\"]",
    "IMGEST_WATERMARK_POSITION: !Ref WatermarkPosition",
    "IMGEST_WATERMARK_OPACITY: !Ref WatermarkOpacity",
    "IMGEST_WATERMARK_VARIANTS: !Ref WatermarkVariants",
];

#[test]
fn every_function_that_makes_variants_has_the_watermark_and_only_those() {
    let template = super::text();
    for (function, grants) in PERMISSIONS {
        if !function.contains("Function") {
            continue;
        }
        let (_, definition) = super::block(&template, &format!("  {function}:"), "      Policies:")
            .unwrap_or_else(|| panic!("no definition of {function}"));
        let makes = MAKE_VARIANTS.contains(function);
        for setting in SETTINGS {
            let has = definition.lines().any(|l| l.trim() == *setting);
            assert_eq!(has, makes, "{function}: {setting}");
        }
        let reads_config = grants.iter().any(|g| {
            g.actions.contains(&"s3:GetObject") && g.resources.contains(&Res::Objects("config/"))
        });
        assert_eq!(reads_config, makes, "{function} reading config/");
    }
}
