# dpaudit: empirical privacy auditing of DP machine learning.
# Run everything: snakemake --cores all
# Rules live in rules/*.smk; helpers and input functions in rules/common.smk.


configfile: "config/config.yaml"


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/train.smk"
include: "rules/simulate.smk"
include: "rules/analysis.smk"
include: "rules/audit.smk"
include: "rules/figures.smk"


onsuccess:
    write_report(REPORT)


rule all:
    default_target: True
    input:
        all_targets(),
