from tests.api_openai.conftest import World

def test_chat(world: World) -> None:
    client = world.client()
    answer = client.chat.completions.create(
        model="acme/writer", messages=[{"role": "user", "content": "hello there friend"}]
    )
    print(answer)
    assert answer.choices[0].message.content == "hello there friend"
