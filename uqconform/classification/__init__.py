"""Conformal classification: split LAC/APS/RAPS/top-k sets, class-conditional and Mondrian,
cross-conformal (CV+, jackknife+) sets,
several heads, sets robust to poisoned data (RPS) and to input perturbations (BinCP),
multi-label sets with a controlled false negative rate (conformal risk control), and
Venn-Abers calibrated probabilities."""

from uqconform.classification.bincp import BinarizedSmoothedClassifier, MeanSmoothedClassifier
from uqconform.classification.cross import CrossConformalClassifier
from uqconform.classification.ensemble import EnsembleConformalClassifier
from uqconform.classification.heads import HeadEnsemble
from uqconform.classification.multidim import MultiDimScoreClassifier
from uqconform.classification.risk import MultiLabelRiskController
from uqconform.classification.rps import ReliablePredictionSets
from uqconform.classification.split import SplitConformalClassifier
from uqconform.classification.venn_abers import CrossVennAbersCalibrator, VennAbersCalibrator

__all__ = [
    "BinarizedSmoothedClassifier",
    "CrossConformalClassifier",
    "CrossVennAbersCalibrator",
    "EnsembleConformalClassifier",
    "HeadEnsemble",
    "MeanSmoothedClassifier",
    "MultiDimScoreClassifier",
    "MultiLabelRiskController",
    "ReliablePredictionSets",
    "SplitConformalClassifier",
    "VennAbersCalibrator",
]
