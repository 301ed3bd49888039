"""A bundled reference text for the pruning measurements, written for this repository.

Half Python, half plain English, because the bundled model learned from Python source and a
hub model mostly from prose: either way the text has structure worth predicting.
"""

SAMPLE_TEXT = '''def moving_average(values, window=3):
    """Return the mean of every run of `window` neighbouring values."""
    if window < 1:
        raise ValueError("window must be at least 1")
    averages = []
    total = sum(values[:window])
    averages.append(total / window)
    for index in range(window, len(values)):
        total += values[index] - values[index - window]
        averages.append(total / window)
    return averages


class Inventory:
    """Count items by name and report the ones that are running low."""

    def __init__(self, threshold=2):
        self.threshold = threshold
        self.counts = {}

    def add(self, name, amount=1):
        self.counts[name] = self.counts.get(name, 0) + amount

    def low(self):
        return sorted(name for name, count in self.counts.items()
                      if count <= self.threshold)


# A short note in plain English follows.
# The ferry leaves the harbour at seven in the morning and returns before dark.
# On calm days the crossing takes forty minutes; when the wind rises it can take
# twice as long, and the crew hands out blankets to passengers on the open deck.
# Most travellers carry bicycles, baskets of bread, or crates of apples from the
# orchards on the island, and the captain knows nearly all of them by name.
'''
