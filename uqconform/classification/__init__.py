"""Conformal classification: split LAC/APS/RAPS/top-k sets, class-conditional and Mondrian."""

from uqconform.classification.split import SplitConformalClassifier

__all__ = ["SplitConformalClassifier"]
