//! `jikji update` of a dense index whose centroid pages are 4-bit centred
//! (`pages.ivf.centroid_codes` = `int4-centred`, what the builder writes from 100,000
//! chunks on; forced here with `JIKJI_IVF_CENTROIDS` on a 41-chunk bundle): below the refit
//! rule the update keeps the 4-bit centroid pages as they are (same names, same codes), puts
//! a new vector in the list of the nearest *stored* centroid (the dequantized 4-bit one the
//! engine routes with), and answers within 0.005 recall@10 of a full rebuild; every list
//! probed, both equal the exact scan.
//!
//! Its own test binary: the environment variable is process-wide, and this is the only
//! test here, so no other build in the process sees it.

mod common;

use jikji_builder::ingest::build;
use jikji_engine::centring::ChunkCentring;
use jikji_engine::{Engine, Mode};
use jikji_format::paged::{ivf, page};
use jikji_format::Bundle;

#[test]
fn update_keeps_4_bit_centroid_pages() {
    std::env::set_var(
        jikji_builder::ingest::write::IVF_CENTROIDS_ENV,
        "int4-centred",
    );
    let tmp = tempfile::tempdir().unwrap();
    let corpus = common::topic_corpus(tmp.path(), 40);
    let bundle = tmp.path().join("bundle");
    build(
        &common::with_model(&corpus, &bundle),
        &common::ivf_settings(6),
    )
    .unwrap();
    let before = common::ivf_root(&bundle);
    assert_eq!(before.centroid_codes(), ivf::CentroidCodes::Int4Centred);
    assert_eq!(before.nlist, 6);

    // One file edited, one added: 3 of 41 vectors changed (below the refit rule).
    common::edit_topic_corpus(&corpus);
    let r = jikji_builder::update::update(&common::with_model(&corpus, &bundle), false).unwrap();
    let note = r.dense_index.clone().unwrap();
    assert!(
        note.starts_with("kept centroids: 3 of 41 vectors"),
        "{note}"
    );

    let after = common::ivf_root(&bundle);
    after.check(41).unwrap();
    // The 4-bit centroid pages are kept: same codes, same page names (hence bytes).
    assert_eq!(after.centroid_codes(), ivf::CentroidCodes::Int4Centred);
    assert_eq!(after.centroid_codes, before.centroid_codes);
    assert_eq!(after.centroids, before.centroids);
    for name in after.all_pages() {
        assert!(bundle.join("p").join(&name).is_file(), "{name}");
    }

    // The new chunk sits in the list of its nearest stored centroid, scored in the centred
    // space the index is built in, with the centroids as the update reads them.
    let new = Bundle::open_dir(&bundle).unwrap();
    let v = new.vectors().unwrap();
    let bodies: Vec<Vec<u8>> = (0..after.centroids.pages)
        .map(|p| {
            let name = after.centroid_page(p);
            page::decode_stored(&name, &std::fs::read(bundle.join("p").join(&name)).unwrap())
                .unwrap()
        })
        .collect();
    let cents = jikji_builder::ingest::write::stored_centroids(&after, &bodies, v.dim()).unwrap();
    let model = new.manifest().model.as_ref().unwrap();
    let centring =
        ChunkCentring::langs_of(model.centring.as_ref().unwrap(), v.len(), v.dim()).unwrap();
    let d = (0..v.len() as u32)
        .find(|&d| {
            new.chunks()
                .get(d)
                .unwrap()
                .text
                .contains("restore drills after")
        })
        .expect("the new chunk");
    let (scale, row) = v.row(d as usize);
    let y = match &centring {
        Some(c) => c.scoring_vector(d as usize, scale, row),
        None => v.get(d as usize),
    };
    let score = |j: usize| cents.get(j).iter().zip(&y).map(|(a, b)| a * b).sum::<f32>();
    let nearest = (0..6)
        .max_by(|&a, &b| score(a).total_cmp(&score(b)).then(b.cmp(&a)))
        .unwrap();
    let list_of = |j: usize| {
        let name = after.list_page(j);
        let body =
            page::decode_stored(&name, &std::fs::read(bundle.join("p").join(&name)).unwrap())
                .unwrap();
        ivf::ListPage::open(&name, &body, 41, v.dim()).unwrap().docs
    };
    assert!(
        list_of(nearest).contains(&d),
        "new chunk {d} not in list {nearest}"
    );

    // Against a full rebuild (its own k-means, 4-bit centroids too): recall@10 against the
    // exact scan within 0.005 at each bundle's default nprobe; every list probed, both give
    // the exact ranking.
    let full = tmp.path().join("full");
    build(
        &common::with_model(&corpus, &full),
        &common::ivf_settings(6),
    )
    .unwrap();
    assert_eq!(
        common::ivf_root(&full).centroid_codes(),
        ivf::CentroidCodes::Int4Centred
    );
    let exact = Engine::open_dir(&bundle).unwrap();
    let (mut eu, mut ef) = (
        Engine::open_dir_paged(&bundle).unwrap(),
        Engine::open_dir_paged(&full).unwrap(),
    );
    let queries = common::pair_queries(v);
    let (ru, rf) = (
        common::recall_at_10(&eu, &exact, &queries),
        common::recall_at_10(&ef, &exact, &queries),
    );
    eprintln!("update recall@10 {ru:.4}; full rebuild recall@10 {rf:.4}");
    assert!(ru >= rf - 0.005, "update {ru} vs full rebuild {rf}");
    eu.set_nprobe(Some(6));
    ef.set_nprobe(Some(6));
    for q in &queries {
        for mode in [Mode::Dense, Mode::Hybrid] {
            let e = exact
                .search_with_vector("restore drills", Some(q), mode, 10)
                .unwrap()
                .hits;
            for engine in [&eu, &ef] {
                let got = engine
                    .search_with_vector("restore drills", Some(q), mode, 10)
                    .unwrap()
                    .hits;
                assert_eq!(got, e);
            }
        }
    }
}
