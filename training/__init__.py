"""Training assembly: the run's settings, prompts, run folder, logging and pass@k evaluation callbacks."""
