"""A multi-node launch whose launcher reports a smaller world than asked for (analyzer/detect/world_shortfall.py,
rules/verdict.yaml `world_shortfall`, texts in rules/detectors.yaml)."""
from llmtriage import analyze

ACCEL = ("+ srun --nodes=2 --ntasks-per-node=1 accelerate launch --config_file ds.yaml --num_machines 2 "
         "--num_processes {asked} --machine_rank 0 train.py\n")
HOSTFILE = ("[2024-06-07 20:06:51,902] [WARNING] [runner.py:202:fetch_hostfile] Unable to find hostfile, will proceed "
            "with training with local resources only.\n")
WORLD = ("[2024-06-07 20:06:54,249] [INFO] [launch.py:151:main] nnodes={nodes}, num_local_procs=8, node_rank=0\n"
         "[2024-06-07 20:06:54,250] [INFO] [launch.py:163:main] dist_world_size={world}\n"
         "[2024-06-07 20:07:41,020] [INFO] [config.py:988:print]   world_size ................... {world}\n"
         "{{'loss': 2.0113, 'learning_rate': 1.9e-06, 'epoch': 0.01}}\n")


def _rules(text):
    return [f.rule_id for f in analyze(text).findings if f.severity == "error"]


def test_two_nodes_asked_one_node_world_started():
    text = ACCEL.format(asked=16) + HOSTFILE + WORLD.format(nodes=1, world=8)
    assert _rules(text)[:1] == ["verdict-world-smaller-than-requested"]
    top = analyze(text).findings[0]
    assert top.category == "deepspeed-config" and "16 processes" in top.message and "8 processes" in top.message


def test_the_whole_world_started_is_healthy():
    assert _rules(ACCEL.format(asked=16) + WORLD.format(nodes=2, world=16)) == []


def test_a_single_node_run_without_a_hostfile_is_healthy():
    text = "+ deepspeed --num_gpus 8 train.py --deepspeed ds.json\n" + HOSTFILE + WORLD.format(nodes=1, world=8)
    assert _rules(text) == []
