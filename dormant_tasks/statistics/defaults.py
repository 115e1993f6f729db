"""The defaults of the findings' statistics (docs/SCORES.md §5 and §7). Light on purpose: the CLI imports it to
build `--help` (`--fdr`, `--resamples`, `--seed`)."""

FDR = 0.05  # the false discovery rate of the heads called to change confident state
FDR_METHOD = "bh"  # Benjamini-Hochberg ("by": Benjamini-Yekutieli, for any dependence between heads)
RESAMPLES = 2000  # bootstrap resamples of the heads
PERMUTATIONS = 500  # permutations of the set labels (input dependence)
SEED = 0  # of every resampling
STATE_SAMPLES = 128  # importance samples per head of the tail behind confident states (statistics/cluster_states.py)
FEW_CLUSTERS = 30  # below this many clusters a state's statistic is read as t(C - 1) (statistics/cluster_states.py)
# the families over which the paired changes' FDR is held (statistics/paired.py; `--paired-fdr`): the heads of each
# adjacent pair, every pair and head of a function, every function and calibration set of a series; the first the default
PAIRED_FDR_FAMILIES = ("pair", "function", "series")
FDR_METHODS = {
    "bh": "Benjamini-Hochberg (independent or positively dependent heads)",
    "by": "Benjamini-Yekutieli (any dependence between heads)",
}
