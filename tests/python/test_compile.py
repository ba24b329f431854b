"""tunefarm.compile, where PyTorch is installed (it is not a dependency; without it the test skips)."""
import numpy as np
import pytest


def test_compile_a_module(client, tmp_path):
    torch = pytest.importorskip("torch")
    import tunefarm

    module = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                                 torch.nn.Linear(4 * 8 * 8, 10))
    x = torch.randn(1, 3, 8, 8)
    compiled = tunefarm.compile(module, (x,), client=client, trials=4, batch_size=4, out_dir=tmp_path, progress=False)
    y = compiled(x)
    assert isinstance(y, torch.Tensor)
    np.testing.assert_allclose(y.numpy(), module(x).detach().numpy(), rtol=1e-4, atol=1e-4)
    assert compiled(x.numpy()).shape == (1, 10)
